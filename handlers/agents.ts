export const agentsHandlers = {}
