// The storage's vocabulary shared by several features and the platform: sorts, date ranges,
// severities and the size of streamed chunks. It imports nothing, so that any port (and db/,
// which implements them) may name it.

export interface Sort {
  field: string
  direction: 'asc' | 'desc'
}

export const severityNames = ['Emergency', 'Alert', 'Critical', 'Error', 'Warning', 'Notice', 'Informational', 'Debug'] as const

/**
 * Characters of JSON text in a chunk of a streamed page (a row more at most). V8 puts a
 * string of more than 128 KB straight into the old generation, where it stays until a full
 * collection: chunks of a thousand agents (1.3 MB each) piled up there, about 100 MB of
 * them during a page of 100,000 agents. Chunks this size die young, within milliseconds.
 */
export const STREAM_CHUNK_CHARS = 64 * 1024

export interface DateRange {
  from: number
  to: number | null
}
