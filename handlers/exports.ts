export const exportsHandlers = {}
