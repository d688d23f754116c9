// Agentless connections, worker pollers and the asset producer.
export const agentlessHandlers: Record<string, (req: any, reply: any) => unknown> = {}
