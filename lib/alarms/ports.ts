// The storage the alarm destination service needs; db/alarms.ts implements it on SQLite.
import type { DeliveryCounts, DestinationInput, DestinationRow } from '../../db/alarms.js'

export interface AlarmDestinationStore {
  all(): Promise<DestinationRow[]>
  byId(id: string): Promise<DestinationRow | undefined>
  /** By name, case-insensitively. */
  byName(name: string): Promise<DestinationRow | undefined>
  count(): Promise<number>
  insert(d: DestinationInput, ms: number, user: string | null): Promise<unknown>
  update(d: DestinationInput, ms: number, user: string | null): Promise<number>
  /** Deletes a destination and cancels its pending deliveries; answers how many were cancelled (-1: none was there). */
  remove(id: string, ms: number): Promise<number>
  counts(id: string, now: number): Promise<DeliveryCounts>
}
