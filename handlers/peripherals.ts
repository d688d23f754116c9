export const peripheralsHandlers = {}
