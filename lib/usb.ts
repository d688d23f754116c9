// What the server derives from a peripheral's USB identity: its icon class and the names
// shown for its vendor and product.

export const iconNames = [
  'NO_DEV',
  'Keyboard',
  'Mouse',
  'Mass Storage',
  'Hub',
  'Printer',
  'Audio',
  'Video',
  'Network Adapter',
  'Wireless Controller',
  'Smart Card',
  'Imaging',
  'Communication',
  'Other',
  'HID',
] as const
export type IconName = (typeof iconNames)[number]

/** The icon code (`devIcon`) from the USB class, subclass and protocol codes (hex strings). */
export function deviceIcon(classCode: string | null | undefined, subclassCode?: string | null, protocolCode?: string | null): number {
  if (!classCode) return 0
  const cls = parseInt(classCode, 16)
  const sub = subclassCode ? parseInt(subclassCode, 16) : -1
  const proto = protocolCode ? parseInt(protocolCode, 16) : -1
  switch (cls) {
    case 0x00:
      return 0 // defined per interface; the agent reports the first interface's codes
    case 0x01:
      return 6
    case 0x02:
    case 0x0a:
      return 12
    case 0x03:
      // HID boot interface: protocol 1 keyboard, 2 mouse.
      if (sub === 1 && proto === 1) return 1
      if (sub === 1 && proto === 2) return 2
      return 14
    case 0x06:
      return 11
    case 0x07:
      return 5
    case 0x08:
      return 3
    case 0x09:
      return 4
    case 0x0b:
      return 10
    case 0x0e:
      return 7
    case 0xe0:
      return 9
    case 0xef:
    case 0xff:
      return 13
    default:
      return 13
  }
}

export const iconName = (code: number): IconName => iconNames[code] ?? 'NO_DEV'

// A few vendors and products of the public USB id database, enough for the common
// devices of an office fleet; otherwise the names the device reports are shown.
const vendors: Record<string, string> = {
  '03F0': 'HP, Inc.',
  '0409': 'NEC Corp.',
  '041E': 'Creative Technology, Ltd',
  '0424': 'Microchip Technology, Inc. (formerly SMSC)',
  '045E': 'Microsoft Corp.',
  '046D': 'Logitech, Inc.',
  '0483': 'STMicroelectronics',
  '04A9': 'Canon, Inc.',
  '04B8': 'Seiko Epson Corp.',
  '04CA': 'Lite-On Technology Corp.',
  '04E8': 'Samsung Electronics Co., Ltd',
  '04F2': 'Chicony Electronics Co., Ltd',
  '05AC': 'Apple, Inc.',
  '05E3': 'Genesys Logic, Inc.',
  '0781': 'SanDisk Corp.',
  '08BB': 'Texas Instruments',
  '0930': 'Toshiba Corp.',
  '0951': 'Kingston Technology',
  '0B95': 'ASIX Electronics Corp.',
  '0BDA': 'Realtek Semiconductor Corp.',
  '0C45': 'Microdia',
  '0D8C': 'C-Media Electronics, Inc.',
  '10C4': 'Silicon Labs',
  '1050': 'Yubico.com',
  '1058': 'Western Digital Technologies, Inc.',
  '1532': 'Razer USA, Ltd',
  '17EF': 'Lenovo',
  '1915': 'Nordic Semiconductor ASA',
  '1A40': 'Terminus Technology Inc.',
  '1B1C': 'Corsair',
  '1D6B': 'Linux Foundation',
  '16C0': 'Van Ooijen Technische Informatica',
  '2109': 'VIA Labs, Inc.',
  '413C': 'Dell Computer Corp.',
  '8087': 'Intel Corp.',
  '0A5C': 'Broadcom Corp.',
  '0BC2': 'Seagate RSS LLC',
  '067B': 'Prolific Technology, Inc.',
  '1366': 'SEGGER',
  '2341': 'Arduino SA',
}
const products: Record<string, string> = {
  '046D:C077': 'M105 Optical Mouse',
  '046D:C31C': 'Keyboard K120',
  '046D:C52B': 'Unifying Receiver',
  '046D:C534': 'Unifying Receiver',
  '046D:085E': 'BRIO Ultra HD Webcam',
  '045E:07F8': 'Wired Keyboard 600',
  '045E:0750': 'Wired Keyboard 600',
  '045E:00CB': 'Basic Optical Mouse v2.0',
  '0951:1666': 'DataTraveler 100 G3/G4/SE9 G2/50',
  '0781:5581': 'Ultra',
  '0781:5583': 'Ultra Fit',
  '0483:5740': 'Virtual COM Port',
  '1D6B:0104': 'Multifunction Composite Gadget',
  '16C0:0486': 'Teensyduino RawHID',
  '1050:0407': 'Yubikey 4/5 OTP+U2F+CCID',
  '413C:2113': 'KB216 Wired Keyboard',
  '413C:301A': 'Dell MS116 Optical Mouse',
  '17EF:6019': 'M-U0025-O Mouse',
  '05E3:0610': 'Hub',
  '0BDA:8153': 'RTL8153 Gigabit Ethernet Adapter',
  '1058:25A2': 'Elements 25A2',
  '03F0:0C17': 'LaserJet 1010',
  '1915:0102': 'nRF24 receiver',
  '04F2:B604': 'Integrated Camera',
  '0BC2:231A': 'Expansion Portable',
  '2109:2817': 'USB2.0 Hub',
  '1A40:0101': 'Hub',
  '10C4:EA60': 'CP210x UART Bridge',
  '067B:2303': 'PL2303 Serial Port',
  '2341:0043': 'Uno R3 (CDC ACM)',
}

export const vendorName = (vid: string): string | undefined => vendors[vid.toUpperCase()]
export const productName = (vid: string, pid: string): string | undefined => products[`${vid.toUpperCase()}:${pid.toUpperCase()}`]

/**
 * A serial number the OS made up (Windows instance ids such as `5&20DBD6CE&0&4` hold `&`)
 * says nothing about the device; only a device's own serial is shown as `guiSerial`.
 */
export const displaySerial = (serial: string | null | undefined): string | null => (serial && !serial.includes('&') ? serial : null)
