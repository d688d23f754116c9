export const catalogueHandlers = {}
