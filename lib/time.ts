/** UTC ISO 8601 with milliseconds and Z, the one time format of every answer. */
export const iso = (ms: number) => new Date(ms).toISOString()
