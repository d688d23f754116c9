// Report definitions, runs and files.
export const reportsHandlers: Record<string, (req: any, reply: any) => unknown> = {}
