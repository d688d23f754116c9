export const insightsHandlers = {}
