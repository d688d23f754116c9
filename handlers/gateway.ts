export const gatewayHandlers = {}
