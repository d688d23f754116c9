// The names insights are kept under: shared with the features that drop or read a kept
// insight (the catalogue, asset discovery), which import this module, never the service.

/** The name an insight is kept under (the vulnerable-peripherals one is dropped on a catalogue change). */
export const VULNERABLE_INSIGHT = 'vulnerablePeripherals'
/** The name the uncommon-peripherals insight is kept under for a host threshold (shared by the insight and asset discovery). */
export const uncommonInsightName = (maxHosts: number) => `uncommonPeripherals:${maxHosts}`
