// Event and audit-trail queries, the integration feeds and their exports.
export const eventsHandlers: Record<string, (req: any, reply: any) => unknown> = {}
