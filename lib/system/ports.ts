// The storage the system status needs; db/system.ts implements it on SQLite, db/postgres/system.ts on PostgreSQL.

/** The agents by connection and mode. */
export interface AgentCounts {
  total: number
  connected: number
  disconnected: number
  armed: number
  free: number
}

export interface SystemStore {
  /** Agent counts; zero until the agents table exists (its migration comes with the agents). */
  agentCounts(): Promise<AgentCounts>
  /** The database's size on disk. */
  sizeBytes(): Promise<number>
  /** The version of the latest migration applied. */
  schemaVersion(): Promise<number>
}
