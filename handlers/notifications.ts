// Risk and system-health notifications, their counts, states and live stream.
export const notificationsHandlers: Record<string, (req: any, reply: any) => unknown> = {}
