// A reader thread of the pool in lib/platform/readers.ts (run by piscina): the tasks of
// db/read-tasks.ts on a read-only connection, each under a time budget (db/reader-runner.ts).
import { workerData } from 'node:worker_threads'
import { readTasks } from './read-tasks.js'
import { readerRunner, type ReaderSetup } from './reader-runner.js'

export default readerRunner(workerData as ReaderSetup, readTasks)
