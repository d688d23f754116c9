// The part of pg-cursor (it ships no types) that db/postgres uses.
declare module 'pg-cursor' {
  import type { CustomTypesConfig, Submittable } from 'pg'

  export default class Cursor<R = unknown> implements Submittable {
    constructor(text: string, values?: unknown[], config?: { rowMode?: 'array'; types?: CustomTypesConfig })
    submit: Submittable['submit']
    read(rows: number): Promise<R[]>
    close(): Promise<void>
  }
}
