// Alarm destinations: list, add or update, remove, test.
export const alarmsHandlers: Record<string, (req: any, reply: any) => unknown> = {}
