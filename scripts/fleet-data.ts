// Realistic, reproducible fleet data shared by the seed script, the simulator and the
// benchmark: hosts (names, OS, models, network adapters, switch ports, tags) and their
// USB peripherals with real VID/PIDs. Host number i of a given seed is always the same
// host, so a restarted simulator presents the same machines again.

export type RunningMode = 'Standard' | 'VDI' | 'Server'

export interface FleetNic {
  name: string
  macAddress: string | null
  ipAddresses: string[]
  status: 'Up' | 'Down' | 'Unknown'
  isEthernet: boolean
}

/** A peripheral as the agent reports it (GatewayPeripheralReport). */
export interface FleetPeripheral {
  deviceID: string
  vid: string
  pid: string
  serialNumber: string | null
  description: string | null
  manufacturer: string | null
  caption: string | null
  status: string | null
  classCode: string | null
  subclassCode: string | null
  protocolCode: string | null
  hierarchy: string | null
  parentDeviceID: string | null
  present: boolean
  isDisabled: boolean
}

export interface FleetHost {
  index: number
  machineId: string
  hostIdentifier: string
  osVersion: string
  manufacturer: string
  pcModel: string
  serviceVersion: string
  kbDriverVersion: string
  runningMode: RunningMode
  localIpAddress: string
  nics: FleetNic[]
  connectedSwitch: { ip: string; name: string; portId: string; portName: string } | null
  hashtags: string[]
  loggedOnUsers: string[]
  peripherals: FleetPeripheral[]
}

// ---------------------------------------------------------------------------------------
// Deterministic randomness

/** mulberry32: small, fast, good enough for test data. */
export class Rand {
  private a: number
  constructor(seed: number) {
    this.a = seed >>> 0
  }
  next(): number {
    this.a = (this.a + 0x6d2b79f5) >>> 0
    let t = this.a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1))
  }
  chance(p: number): boolean {
    return this.next() < p
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]
  }
  weighted<T>(items: readonly (readonly [T, number])[]): T {
    let total = 0
    for (const [, w] of items) total += w
    let x = this.next() * total
    for (const [item, w] of items) {
      x -= w
      if (x < 0) return item
    }
    return items[items.length - 1][0]
  }
  hex(digits: number, upper = true): string {
    let s = ''
    for (let i = 0; i < digits; i++) s += Math.floor(this.next() * 16).toString(16)
    return upper ? s.toUpperCase() : s
  }
  alnum(n: number): string {
    const chars = 'ABCDEFGHJKLMNPQRSTUVWXYZ0123456789'
    let s = ''
    for (let i = 0; i < n; i++) s += chars[Math.floor(this.next() * chars.length)]
    return s
  }
}

/** A 32-bit hash of the seed, a stream name and an index: each host gets its own stream. */
export function streamSeed(seed: number, stream: string, index: number): number {
  let h = 0x811c9dc5 ^ seed
  const mix = (n: number) => {
    h ^= n
    h = Math.imul(h, 0x01000193)
  }
  for (let i = 0; i < stream.length; i++) mix(stream.charCodeAt(i))
  mix(index & 0xffff)
  mix(index >>> 16)
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  return h >>> 0
}

/** A stable, GUID-shaped machine id (like Windows MachineGuid). */
export function machineId(seed: number, stream: string, index: number): string {
  const r = new Rand(streamSeed(seed, stream + ':machine', index))
  const h = r.hex(32, false)
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${'89ab'[r.int(0, 3)]}${h.slice(17, 20)}-${h.slice(20, 32)}`
}

/** An RFC 4122 version 4 uuid from the stream (the seed script assigns agent uuids). */
export function uuidFrom(r: Rand): string {
  const h = r.hex(32, false)
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${'89ab'[r.int(0, 3)]}${h.slice(17, 20)}-${h.slice(20, 32)}`
}

// ---------------------------------------------------------------------------------------
// Hosts

const sites = [
  { code: 'NYC', octet: 10, floors: 12 },
  { code: 'LON', octet: 20, floors: 6 },
  { code: 'PAR', octet: 30, floors: 4 },
  { code: 'FRA', octet: 40, floors: 5 },
  { code: 'TLV', octet: 50, floors: 8 },
  { code: 'SGP', octet: 60, floors: 3 },
  { code: 'SFO', octet: 70, floors: 7 },
  { code: 'TOR', octet: 80, floors: 4 },
  { code: 'SYD', octet: 90, floors: 3 },
  { code: 'BLR', octet: 100, floors: 9 },
] as const
const departments = [
  ['fin', 12],
  ['hr', 5],
  ['eng', 25],
  ['sales', 14],
  ['ops', 10],
  ['legal', 3],
  ['it', 6],
  ['support', 12],
  ['mkt', 6],
  ['rnd', 7],
] as const
const people = [
  'jdoe',
  'asmith',
  'mgarcia',
  'lchen',
  'pnovak',
  'rkhan',
  'sbrown',
  'ktanaka',
  'omartin',
  'ebauer',
  'dkowalski',
  'fsilva',
  'hnguyen',
  'ipetrov',
  'jmuller',
  'aroux',
  'bcohen',
  'clevy',
  'tjohnson',
  'nrossi',
  'vdubois',
  'wkim',
  'ylopez',
  'zahmed',
]

interface Platform {
  manufacturer: string
  model: string
  laptop: boolean
  mode: RunningMode
  os: readonly (readonly [string, number])[]
}
const windowsClient = [
  ['Windows 11 Pro 23H2 (10.0.22631)', 30],
  ['Windows 11 Enterprise 23H2 (10.0.22631)', 25],
  ['Windows 11 Enterprise 24H2 (10.0.26100)', 12],
  ['Windows 10 Pro 22H2 (10.0.19045)', 18],
  ['Windows 10 Enterprise 22H2 (10.0.19045)', 10],
  ['Windows 10 Enterprise LTSC 2021 (10.0.19044)', 3],
] as const
const windowsServer = [
  ['Windows Server 2022 Standard (10.0.20348)', 50],
  ['Windows Server 2019 Datacenter (10.0.17763)', 30],
  ['Windows Server 2016 Standard (10.0.14393)', 8],
  ['Ubuntu 22.04.4 LTS (5.15.0-105-generic)', 8],
  ['Red Hat Enterprise Linux 9.3 (5.14.0-362.8.1.el9_3)', 6],
] as const
const platforms: readonly (readonly [Platform, number])[] = [
  [{ manufacturer: 'Dell Inc.', model: 'OptiPlex 7090', laptop: false, mode: 'Standard', os: windowsClient }, 14],
  [{ manufacturer: 'Dell Inc.', model: 'OptiPlex 7010', laptop: false, mode: 'Standard', os: windowsClient }, 8],
  [{ manufacturer: 'Dell Inc.', model: 'Latitude 5440', laptop: true, mode: 'Standard', os: windowsClient }, 12],
  [{ manufacturer: 'Dell Inc.', model: 'Latitude 7420', laptop: true, mode: 'Standard', os: windowsClient }, 7],
  [{ manufacturer: 'HP', model: 'HP EliteBook 840 G8 Notebook PC', laptop: true, mode: 'Standard', os: windowsClient }, 10],
  [{ manufacturer: 'HP', model: 'HP ProDesk 600 G6 Small Form Factor PC', laptop: false, mode: 'Standard', os: windowsClient }, 6],
  [{ manufacturer: 'LENOVO', model: 'ThinkPad T14 Gen 3 (21AH)', laptop: true, mode: 'Standard', os: windowsClient }, 11],
  [{ manufacturer: 'LENOVO', model: 'ThinkCentre M70q Gen 2 (11MY)', laptop: false, mode: 'Standard', os: windowsClient }, 6],
  [{ manufacturer: 'Microsoft Corporation', model: 'Surface Laptop 5', laptop: true, mode: 'Standard', os: windowsClient.slice(0, 3) }, 3],
  [
    {
      manufacturer: 'Apple Inc.',
      model: 'MacBookPro18,3',
      laptop: true,
      mode: 'Standard',
      os: [
        ['macOS 14.4.1 Sonoma (23E224)', 3],
        ['macOS 13.6.6 Ventura (22G630)', 1],
      ],
    },
    3,
  ],
  [{ manufacturer: 'VMware, Inc.', model: 'VMware7,1', laptop: false, mode: 'VDI', os: windowsClient.slice(0, 5) }, 7],
  [{ manufacturer: 'Citrix', model: 'Citrix Hypervisor VM', laptop: false, mode: 'VDI', os: windowsClient.slice(3, 5) }, 3],
  [{ manufacturer: 'Dell Inc.', model: 'PowerEdge R650', laptop: false, mode: 'Server', os: windowsServer }, 3],
  [{ manufacturer: 'HPE', model: 'ProLiant DL380 Gen10', laptop: false, mode: 'Server', os: windowsServer }, 2],
]
const serviceVersions = [
  ['4.2.1.118', 55],
  ['4.2.0.96', 25],
  ['4.1.7.240', 15],
  ['4.0.12.31', 5],
] as const
const driverFor: Record<string, string> = { '4.2.1.118': '4.2.0.77', '4.2.0.96': '4.2.0.77', '4.1.7.240': '4.1.5.60', '4.0.12.31': '4.0.9.12' }

const mac = (r: Rand, oui: string) => `${oui}-${r.hex(2)}-${r.hex(2)}-${r.hex(2)}`

/** Host number `index` of the fleet `seed` in namespace `stream` (the same inputs give the same host). */
export function fleetHost(seed: number, stream: string, index: number, peripheralsPerAgent = 10): FleetHost {
  const r = new Rand(streamSeed(seed, stream, index))
  const site = sites[index % sites.length]
  const dept = r.weighted(departments.map(([d, w]) => [d, w] as const))
  const platform = r.weighted(platforms)
  const os = r.weighted(platform.os)
  const serviceVersion = r.weighted(serviceVersions)
  // Unique per index: each site has its 10.x/16 blocks, 200 hosts per /24.
  const n = Math.floor(index / sites.length)
  const subnet = Math.floor(n / 200)
  const vlan = subnet & 0xff
  const second = site.octet + (subnet >> 8)
  const hostPart = 10 + (n % 200)
  const ip = `10.${second}.${vlan}.${hostPart}`
  const prefix = platform.mode === 'Server' ? 'SRV' : platform.mode === 'VDI' ? 'VDI' : platform.laptop ? 'LT' : 'WS'
  const hostIdentifier = r.chance(0.2) ? `DESKTOP-${r.alnum(7)}` : `${site.code}-${dept.toUpperCase()}-${prefix}${String(n).padStart(5, '0')}`

  const nics: FleetNic[] = []
  if (platform.mode !== 'Standard' || !platform.laptop) {
    nics.push({
      name: 'Ethernet',
      macAddress: mac(r, platform.mode === 'VDI' ? '00-50-56' : r.pick(['00-1A-2B', 'D4-81-D7', 'B0-7B-25', '8C-EC-4B'])),
      ipAddresses: [ip],
      status: 'Up',
      isEthernet: true,
    })
    if (platform.mode === 'Server') nics.push({ name: 'Ethernet 2', macAddress: mac(r, 'B0-7B-25'), ipAddresses: [`10.${second + 5}.${vlan}.${hostPart}`], status: 'Up', isEthernet: true })
  } else {
    const docked = r.chance(0.45)
    nics.push({ name: 'Wi-Fi', macAddress: mac(r, r.pick(['F4-26-79', '3C-21-9C', 'A4-C3-F0'])), ipAddresses: docked ? [] : [ip], status: docked ? 'Down' : 'Up', isEthernet: false })
    if (docked) nics.push({ name: 'Ethernet 3', macAddress: mac(r, '00-E0-4C'), ipAddresses: [ip], status: 'Up', isEthernet: true })
    if (r.chance(0.3)) nics.push({ name: 'Cisco AnyConnect Secure Mobility Client Virtual Miniport Adapter', macAddress: mac(r, '00-05-9A'), ipAddresses: [], status: 'Down', isEthernet: false })
  }
  if (platform.mode === 'Standard' && !platform.laptop && r.chance(0.1)) {
    nics.push({ name: 'vEthernet (Default Switch)', macAddress: mac(r, '00-15-5D'), ipAddresses: [`172.${r.int(16, 31)}.${r.int(0, 255)}.1`], status: 'Up', isEthernet: false })
  }
  const wired = nics.some((x) => x.isEthernet && x.status === 'Up')
  const floor = 1 + (n % site.floors)
  const port = 1 + (n % 48)
  const connectedSwitch =
    wired && platform.mode !== 'VDI' && r.chance(0.75)
      ? { ip: `10.${second}.${vlan}.2`, name: `${site.code.toLowerCase()}-fl${floor}-sw${1 + (subnet % 4)}`, portId: `Gi1/0/${port}`, portName: `GigabitEthernet1/0/${port}` }
      : null

  const hashtags = r.chance(0.85) ? [`#${dept}`, `#${site.code.toLowerCase()}`, ...(r.chance(0.15) ? ['#vip'] : [])] : []
  const user = r.pick(people)
  const loggedOnUsers = platform.mode === 'Server' ? (r.chance(0.3) ? ['ACME\\svc-backup'] : []) : [`ACME\\${user}`]

  const host: FleetHost = {
    index,
    machineId: machineId(seed, stream, index),
    hostIdentifier,
    osVersion: os,
    manufacturer: platform.manufacturer,
    pcModel: platform.model,
    serviceVersion,
    kbDriverVersion: driverFor[serviceVersion],
    runningMode: platform.mode,
    localIpAddress: ip,
    nics,
    connectedSwitch,
    hashtags,
    loggedOnUsers,
    peripherals: [],
  }
  host.peripherals = hostPeripherals(r, platform, peripheralsPerAgent)
  return host
}

// ---------------------------------------------------------------------------------------
// Peripherals

export type PeripheralKind =
  | 'keyboard'
  | 'mouse'
  | 'receiver'
  | 'storage'
  | 'hub'
  | 'webcam'
  | 'headset'
  | 'network'
  | 'printer'
  | 'smartcard'
  | 'bluetooth'
  | 'serial'
  | 'phone'
  | 'fingerprint'
  | 'kvm'
  | 'attack'
  | 'vulnerable'

export interface PeripheralModel {
  kind: PeripheralKind
  vid: string
  pid: string
  manufacturer: string
  description: string
  caption: string
  codes: [string, string, string]
  /** The device has its own serial number (else the OS makes up an instance id). */
  serial: 'own' | 'instance'
}

const hidKbd: [string, string, string] = ['03', '01', '01']
const hidMouse: [string, string, string] = ['03', '01', '02']
const storage: [string, string, string] = ['08', '06', '50']
const m = (
  kind: PeripheralKind,
  vid: string,
  pid: string,
  manufacturer: string,
  description: string,
  caption: string,
  codes: [string, string, string],
  serial: 'own' | 'instance' = 'instance',
): PeripheralModel => ({ kind, vid, pid, manufacturer, description, caption, codes, serial })

export const peripheralModels: PeripheralModel[] = [
  m('keyboard', '046D', 'C31C', 'Logitech', 'USB Input Device', 'Logitech USB Keyboard', hidKbd),
  m('keyboard', '045E', '07F8', 'Microsoft', 'USB Input Device', 'Microsoft Wired Keyboard 600', hidKbd),
  m('keyboard', '045E', '0750', 'Microsoft', 'USB Input Device', 'Microsoft Wired Keyboard 600', hidKbd),
  m('keyboard', '413C', '2113', 'Dell', 'USB Input Device', 'Dell KB216 Wired Keyboard', hidKbd),
  m('keyboard', '17EF', '6099', 'Lenovo', 'USB Input Device', 'Lenovo Traditional USB Keyboard', hidKbd),
  m('keyboard', '04F2', '0112', 'Chicony', 'USB Input Device', 'USB Keyboard', hidKbd),
  m('keyboard', '05AC', '024F', 'Apple Inc.', 'USB Input Device', 'Apple Aluminium Keyboard', hidKbd),
  m('mouse', '046D', 'C077', 'Logitech', 'USB Input Device', 'USB Optical Mouse', hidMouse),
  m('mouse', '045E', '00CB', 'Microsoft', 'USB Input Device', 'Microsoft Basic Optical Mouse v2.0', hidMouse),
  m('mouse', '413C', '301A', 'Dell', 'USB Input Device', 'Dell MS116 USB Optical Mouse', hidMouse),
  m('mouse', '17EF', '6019', 'Lenovo', 'USB Input Device', 'Lenovo USB Optical Mouse', hidMouse),
  m('mouse', '1532', '0084', 'Razer', 'USB Input Device', 'Razer DeathAdder V2', hidMouse),
  m('receiver', '046D', 'C534', 'Logitech', 'USB Composite Device', 'Logitech USB Receiver', hidKbd),
  m('receiver', '046D', 'C548', 'Logitech', 'USB Composite Device', 'Logi Bolt Receiver', hidKbd),
  m('storage', '0951', '1666', 'Kingston', 'USB Mass Storage Device', 'Kingston DataTraveler 3.0 USB Device', storage, 'own'),
  m('storage', '0781', '5581', 'SanDisk', 'USB Mass Storage Device', 'SanDisk Ultra USB Device', storage, 'own'),
  m('storage', '0781', '5583', 'SanDisk', 'USB Mass Storage Device', 'SanDisk Ultra Fit USB Device', storage, 'own'),
  m('storage', '1058', '25A2', 'Western Digital', 'USB Mass Storage Device', 'WD Elements 25A2 USB Device', storage, 'own'),
  m('storage', '0BC2', '231A', 'Seagate', 'USB Attached SCSI (UAS) Mass Storage Device', 'Seagate Expansion SCSI Disk Device', ['08', '06', '62'], 'own'),
  m('storage', '090C', '1000', 'Silicon Motion', 'USB Mass Storage Device', 'SMI USB DISK USB Device', storage, 'own'),
  m('hub', '05E3', '0610', 'Genesys Logic', 'Generic USB Hub', 'Generic USB Hub', ['09', '00', '02']),
  m('hub', '2109', '2817', 'VIA Labs, Inc.', 'Generic USB Hub', 'USB2.0 Hub', ['09', '00', '02']),
  m('hub', '1A40', '0101', 'Terminus Technology', 'Generic USB Hub', 'USB 2.0 Hub', ['09', '00', '01']),
  m('hub', '0424', '2514', 'Microchip', 'Generic USB Hub', 'USB2514B Hub', ['09', '00', '02']),
  m('webcam', '046D', '085E', 'Logitech', 'USB Video Device', 'Logitech BRIO', ['0E', '01', '00'], 'own'),
  m('webcam', '046D', '0825', 'Logitech', 'USB Video Device', 'Logitech HD Webcam C270', ['0E', '01', '00']),
  m('webcam', '04F2', 'B604', 'Chicony', 'USB Video Device', 'Integrated Camera', ['0E', '01', '00']),
  m('webcam', '0C45', '6366', 'Microdia', 'USB Video Device', 'Webcam', ['0E', '01', '00']),
  m('headset', '046D', '0A44', 'Logitech', 'USB Audio Device', 'Logitech USB Headset H390', ['01', '01', '00']),
  m('headset', '0B0E', '245D', 'GN Audio', 'USB Audio Device', 'Jabra Evolve2 65', ['01', '01', '00'], 'own'),
  m('headset', '047F', 'C056', 'Plantronics', 'USB Audio Device', 'Plantronics Blackwire 3220 Series', ['01', '01', '00']),
  m('headset', '0D8C', '0014', 'C-Media Electronics Inc.', 'USB Audio Device', 'USB Audio Device', ['01', '01', '00']),
  m('network', '0BDA', '8153', 'Realtek', 'Realtek USB GbE Family Controller', 'Realtek USB GbE Family Controller', ['FF', 'FF', '00'], 'own'),
  m('network', '0B95', '1790', 'ASIX', 'ASIX AX88179 USB 3.0 to Gigabit Ethernet Adapter', 'ASIX AX88179 USB 3.0 to Gigabit Ethernet Adapter', ['FF', 'FF', '00'], 'own'),
  m('printer', '03F0', '0C17', 'HP', 'USB Printing Support', 'HP LaserJet 1010', ['07', '01', '02'], 'own'),
  m('printer', '04B8', '1143', 'EPSON', 'USB Printing Support', 'EPSON L3150 Series', ['07', '01', '02'], 'own'),
  m('smartcard', '1050', '0407', 'Yubico', 'USB Composite Device', 'YubiKey OTP+FIDO+CCID', hidKbd),
  m('smartcard', '076B', '3031', 'HID Global', 'Microsoft Usbccid Smartcard Reader (WUDF)', 'OMNIKEY 3x21 Smart Card Reader', ['0B', '00', '00']),
  m('bluetooth', '8087', '0026', 'Intel Corporation', 'Intel(R) Wireless Bluetooth(R)', 'Intel(R) Wireless Bluetooth(R)', ['E0', '01', '01']),
  m('bluetooth', '0A5C', '21E8', 'Broadcom', 'Broadcom BCM20702A0', 'BCM20702A0', ['E0', '01', '01'], 'own'),
  m('serial', '10C4', 'EA60', 'Silicon Labs', 'Silicon Labs CP210x USB to UART Bridge', 'Silicon Labs CP210x USB to UART Bridge (COM3)', ['FF', '00', '00'], 'own'),
  m('serial', '067B', '2303', 'Prolific', 'Prolific USB-to-Serial Comm Port', 'Prolific USB-to-Serial Comm Port (COM4)', ['FF', '00', '00']),
  m('serial', '2341', '0043', 'Arduino LLC', 'Arduino Uno', 'Arduino Uno (COM5)', ['02', '02', '01'], 'own'),
  m('phone', '05AC', '12A8', 'Apple Inc.', 'Apple Mobile Device USB Composite Device', 'Apple iPhone', ['06', '01', '01'], 'own'),
  m('phone', '04E8', '6860', 'SAMSUNG Electronics Co., Ltd.', 'SAMSUNG Mobile USB Composite Device', 'Galaxy S23', ['06', '01', '01'], 'own'),
  m('fingerprint', '06CB', '00BD', 'Synaptics', 'Synaptics UWP WBDI', 'Synaptics FS7605 Touch Fingerprint Sensor', ['FF', '00', '00'], 'own'),
  m('kvm', '0557', '2419', 'ATEN', 'USB Input Device', 'ATEN CS1784A KVM Switch', hidKbd),
  // The catalogue shipped with the product (migration 003).
  m('attack', '0483', '5740', 'STMicroelectronics', 'USB Serial Device', 'USB Serial Device (COM7)', ['02', '02', '01'], 'own'),
  m('attack', '1D6B', '0104', 'Linux Foundation', 'USB Composite Device', 'Multifunction Composite Gadget', hidKbd, 'own'),
  m('attack', '16C0', '0486', 'Teensyduino', 'USB Input Device', 'Teensyduino RawHID', hidKbd, 'own'),
  m('vulnerable', '046D', 'C52B', 'Logitech', 'USB Composite Device', 'Logitech Unifying Receiver', hidKbd),
  m('vulnerable', '1915', '0102', 'Nordic Semiconductor', 'USB Input Device', 'nRF24 Wireless Receiver', hidKbd),
]

const byKind = new Map<PeripheralKind, PeripheralModel[]>()
for (const model of peripheralModels) byKind.set(model.kind, [...(byKind.get(model.kind) ?? []), model])
export const modelsOf = (kind: PeripheralKind): PeripheralModel[] => byKind.get(kind) ?? []

/** Devices people plug in and out: what the simulator plugs, and the filler of a host. */
export const removableKinds: readonly (readonly [PeripheralKind, number])[] = [
  ['storage', 30],
  ['phone', 14],
  ['headset', 12],
  ['mouse', 8],
  ['keyboard', 4],
  ['receiver', 8],
  ['smartcard', 6],
  ['webcam', 5],
  ['serial', 3],
  ['network', 4],
  ['printer', 2],
  ['hub', 4],
]

interface Port {
  rootHub: string
  rootId: string
  nextPort: number
}

function rootHub(r: Rand): Port {
  const usb3 = r.chance(0.8)
  return {
    rootHub: usb3 ? 'USB Root Hub (USB 3.0)' : 'USB Root Hub',
    rootId: `USB\\ROOT_HUB${usb3 ? '30' : ''}\\4&${r.hex(8)}&0&0`,
    nextPort: 1,
  }
}

/** One peripheral of a model, plugged into `port` (or behind `hub`). */
export function makePeripheral(r: Rand, model: PeripheralModel, port: Port, hub?: FleetPeripheral, present = true): FleetPeripheral {
  const portNo = port.nextPort++
  const serial = model.serial === 'own' ? r.hex(r.pick([12, 16, 24])) : `${r.int(5, 9)}&${r.hex(8)}&0&${portNo}`
  const hubNo = hub ? 2 : 1
  return {
    deviceID: `USB\\VID_${model.vid}&PID_${model.pid}\\${serial}`,
    vid: model.vid,
    pid: model.pid,
    serialNumber: serial,
    description: model.description,
    manufacturer: model.manufacturer,
    caption: model.caption,
    status: present ? 'OK' : 'Unknown',
    classCode: model.codes[0],
    subclassCode: model.codes[1],
    protocolCode: model.codes[2],
    hierarchy: hub
      ? `${port.rootHub} > ${hub.caption} > Port_#${String(portNo).padStart(4, '0')}.Hub_#${String(hubNo).padStart(4, '0')}`
      : `${port.rootHub} > Port_#${String(portNo).padStart(4, '0')}.Hub_#0001`,
    parentDeviceID: hub ? hub.deviceID : port.rootId,
    present,
    isDisabled: false,
  }
}

function hostPeripherals(r: Rand, platform: Platform, perAgent: number): FleetPeripheral[] {
  const port = rootHub(r)
  const list: FleetPeripheral[] = []
  const add = (kind: PeripheralKind, hub?: FleetPeripheral, present = true) => {
    const p = makePeripheral(r, r.pick(modelsOf(kind)), port, hub, present)
    list.push(p)
    return p
  }
  // The count varies around the target; VDI desktops and servers see few devices, so
  // workstations carry a little more and the fleet's mean stays near `perAgent`.
  const target = platform.mode === 'Standard' ? Math.max(2, Math.round(perAgent * 1.1) + r.int(-3, 3)) : Math.max(1, Math.round(perAgent * 0.4) + r.int(-1, 1))
  if (platform.mode === 'Server') {
    add('kvm')
    if (r.chance(0.3)) add('storage')
  } else if (platform.mode === 'VDI') {
    add('keyboard')
    add('mouse')
    if (r.chance(0.4)) add('headset')
  } else {
    if (platform.laptop) {
      list.push(makePeripheral(r, modelsOf('webcam')[2], port))
      add('bluetooth')
      if (r.chance(0.5)) add('fingerprint')
    }
    const dock = add('hub')
    add('keyboard', dock)
    add(r.chance(0.25) ? 'receiver' : 'mouse', dock)
    if (r.chance(0.6)) add('headset', dock)
    if (!platform.laptop && r.chance(0.5)) add('webcam', dock)
    if (platform.laptop && r.chance(0.4)) add('network', dock)
  }
  // Fill up with removable devices, some of them seen before and unplugged since.
  while (list.length < target) {
    add(r.weighted(removableKinds), undefined, r.chance(0.7))
  }
  // Now and then a risky device: about 1 host in 40 a vulnerable receiver, 1 in 300 an attack tool.
  if (platform.mode !== 'Server' && r.chance(0.025)) add('vulnerable')
  if (r.chance(0.0033)) add('attack', undefined, r.chance(0.8))
  return list
}

/** A device plugged in later (the simulator): mostly ordinary, now and then a risky one. */
export function pluggedDevice(r: Rand, hostIndex: number, seq: number): FleetPeripheral {
  const port: Port = { rootHub: 'USB Root Hub (USB 3.0)', rootId: `USB\\ROOT_HUB30\\4&${((hostIndex * 2654435761) >>> 0).toString(16).toUpperCase().padStart(8, '0')}&0&0`, nextPort: 5 + (seq % 8) }
  const kind: PeripheralKind = r.chance(0.01) ? 'attack' : r.chance(0.03) ? 'vulnerable' : r.weighted(removableKinds)
  return makePeripheral(r, r.pick(modelsOf(kind)), port)
}
