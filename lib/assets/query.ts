// The asset query language of the NAC connector's `conditionalTable` (filters, system
// filters, global search, paging and sorting), read into the conditions db/assets.ts renders.
// Errors are AssetQueryErrors naming the input at fault: GraphQL answers them as GraphQL
// errors, the REST list as 400 problems.
import { TEXT_FIELDS, type AssetField, type AssetSort, type Condition } from './ports.js'
import { contains, date } from '../listing.js'

export class AssetQueryError extends Error {
  constructor(
    readonly at: string,
    reason: string,
  ) {
    super(`${at} ${reason}`)
  }
}

/** Filters of a query, `filters` and `systemFilters` together (the NAC connector sends six). */
export const MAX_FILTERS = 20
/** Values of one filter (a "multiple" list, or integers); the NAC connector's longest list has eight. */
export const MAX_VALUES = 50
export const MAX_VALUE_LENGTH = 1024
export const MAX_PAGE_SIZE = 10_000
export const DEFAULT_GRAPH_PAGE_SIZE = 20

/** Every field a filter or a sort may name (matched case-insensitively). */
export const FILTER_FIELDS: readonly AssetField[] = [
  'key',
  'name',
  'mac',
  'ipAddress',
  'model',
  'vendor',
  'statusDescription',
  'switchIp',
  'switchName',
  'portName',
  'type',
  'icon',
  'hierarchy',
  'riskLevel',
  'isOnline',
  'isRiskAccepted',
  'firstSeen',
  'lastSeen',
]
export const SORT_FIELDS = FILTER_FIELDS
const BOOLEAN_FIELDS: ReadonlySet<AssetField> = new Set(['isOnline', 'isRiskAccepted'])
const DATE_FIELDS: ReadonlySet<AssetField> = new Set(['firstSeen', 'lastSeen'])

export const EXPRESSIONS = ['Exact', 'NotExact', 'Contains', 'NotContains', 'StartsWith', 'EndsWith', 'GreaterThan', 'GreaterThanOrEqual', 'LessThan', 'LessThanOrEqual'] as const
type Expression = (typeof EXPRESSIONS)[number]

/** One filter as the connector sends it (GraphQL `ConditionalRowFilterInput`). */
export interface FilterInput {
  index?: number | null
  field: string
  expression: string
  value?: string | null
  op?: string | null
  conditionTypeValue?: string | null
  is_userattribute?: boolean | null
}

const byLower = <T extends string>(list: readonly T[], value: string): T | undefined => list.find((x) => x.toLowerCase() === value.trim().toLowerCase())

/** A MAC in the form the query compares: 12 hex digits, lower-case (or the text as given when it is no MAC). */
export function macKey(value: string): string {
  const hex = value.replace(/[-:.\s]/g, '').toLowerCase()
  return /^[0-9a-f]+$/.test(hex) ? hex : value.trim().toLowerCase()
}

function kindOf(field: AssetField): 'text' | 'number' | 'boolean' | 'date' {
  if (TEXT_FIELDS.has(field)) return 'text'
  if (BOOLEAN_FIELDS.has(field)) return 'boolean'
  if (DATE_FIELDS.has(field)) return 'date'
  return 'number'
}

function integer(v: string, at: string): number {
  const t = v.trim()
  if (!/^-?\d{1,9}$/.test(t)) throw new AssetQueryError(at, `must be an integer (or a comma-separated list of them), not "${t.slice(0, 40)}"`)
  return Number(t)
}

function boolean(v: string, at: string): number {
  if (/^(true|1)$/i.test(v.trim())) return 1
  if (/^(false|0)$/i.test(v.trim())) return 0
  throw new AssetQueryError(at, 'must be true or false (any case) or 1 or 0')
}

/** The values of a filter: a comma-separated list with `multiple` or on an integer field, else the one value as given. */
function valuesOf(f: Pick<FilterInput, 'value' | 'conditionTypeValue'>, kind: ReturnType<typeof kindOf> | undefined): string[] {
  const raw = f.value ?? ''
  const multiple = (f.conditionTypeValue ?? '').trim().toLowerCase() === 'multiple'
  // Numbers hold no commas, so a list of them is a list whatever conditionTypeValue says.
  if (!multiple && kind !== 'number') return [raw]
  return raw
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '')
}

/** How many values a filter as sent holds (its cost, before it is read; lib/assets/index.ts). */
export function filterValueCount(f: Partial<FilterInput>): number {
  const field = typeof f.field === 'string' ? byLower(FILTER_FIELDS, f.field) : undefined
  const value = typeof f.value === 'string' ? f.value : ''
  const type = typeof f.conditionTypeValue === 'string' ? f.conditionTypeValue : null
  return Math.max(1, valuesOf({ value, conditionTypeValue: type }, field && kindOf(field)).length)
}

/** One filter as a condition. `at` names it in errors (e.g. `filters[2]`). */
export function condition(f: FilterInput, at: string): Condition {
  if (f.is_userattribute) throw new AssetQueryError(`${at}.is_userattribute`, 'is true, but no user attributes are defined: filter on an asset field')
  const field = byLower(FILTER_FIELDS, f.field)
  if (!field) throw new AssetQueryError(`${at}.field`, `"${f.field.slice(0, 40)}" is unknown: use one of ${FILTER_FIELDS.join(', ')}`)
  const expression = byLower(EXPRESSIONS, f.expression) as Expression | undefined
  if (!expression) throw new AssetQueryError(`${at}.expression`, `"${f.expression.slice(0, 40)}" is unknown: use one of ${EXPRESSIONS.join(', ')}`)
  const raw = f.value ?? ''
  if (raw.length > MAX_VALUE_LENGTH) throw new AssetQueryError(`${at}.value`, `is longer than ${MAX_VALUE_LENGTH} characters`)
  if (raw.includes('\u0000')) throw new AssetQueryError(`${at}.value`, 'must not contain the NUL character')
  const kind = kindOf(field)
  const values = valuesOf(f, kind)
  if (values.length === 0) throw new AssetQueryError(`${at}.value`, 'is empty')
  if (values.length > MAX_VALUES) throw new AssetQueryError(`${at}.value`, `lists ${values.length} values: at most ${MAX_VALUES} per filter`)
  const at_ = `${at}.value`
  const one = () => {
    if (values.length !== 1) throw new AssetQueryError(at_, `takes one value with ${expression}`)
    return values[0]
  }
  const refuse = (): never => {
    throw new AssetQueryError(`${at}.expression`, `${expression} does not apply to ${field} (a ${kind}): use ${allowedFor(kind).join(', ')}`)
  }

  if (kind === 'text') {
    const norm = field === 'mac' ? macKey : (v: string) => v
    switch (expression) {
      case 'Exact':
        return { field, op: 'in', values: values.map(norm) }
      case 'NotExact':
        return { field, op: 'notIn', values: values.map(norm) }
      case 'Contains':
        return { field, op: 'like', values: values.map((v) => contains(norm(v))) }
      case 'NotContains':
        return { field, op: 'notLike', values: values.map((v) => contains(norm(v))) }
      case 'StartsWith':
        return { field, op: 'like', values: values.map((v) => contains(norm(v)).slice(1)) }
      case 'EndsWith':
        return { field, op: 'like', values: values.map((v) => contains(norm(v)).slice(0, -1)) }
      default:
        return refuse()
    }
  }
  if (kind === 'boolean') {
    if (expression === 'Exact') return { field, op: 'in', values: [boolean(one(), at_)] }
    if (expression === 'NotExact') return { field, op: 'notIn', values: [boolean(one(), at_)] }
    return refuse()
  }
  if (kind === 'number') {
    switch (expression) {
      case 'Exact':
        return { field, op: 'in', values: values.map((v) => integer(v, at_)) }
      case 'NotExact':
        return { field, op: 'notIn', values: values.map((v) => integer(v, at_)) }
      case 'GreaterThan':
        return { field, op: 'gt', values: [integer(one(), at_)] }
      case 'GreaterThanOrEqual':
        return { field, op: 'ge', values: [integer(one(), at_)] }
      case 'LessThan':
        return { field, op: 'lt', values: [integer(one(), at_)] }
      case 'LessThanOrEqual':
        return { field, op: 'le', values: [integer(one(), at_)] }
      default:
        return refuse()
    }
  }
  // Dates: a date alone means its whole UTC day, a date and time that instant.
  const v = one()
  let from: number | undefined
  try {
    from = date(v, at_)
  } catch {
    throw new AssetQueryError(at_, 'must be a date such as 2024-05-01, 2024-05-01T12:00:00Z or 2024-05-01 12:00:00')
  }
  const to = /^\d{4}-\d{2}-\d{2}$/.test(v.trim()) ? from! + 86_400_000 : from! + 1
  switch (expression) {
    case 'Exact':
      return { field, op: 'range', values: [from!, to] }
    case 'NotExact':
      return { field, op: 'notRange', values: [from!, to] }
    case 'GreaterThan':
      return { field, op: 'ge', values: [to] }
    case 'GreaterThanOrEqual':
      return { field, op: 'ge', values: [from!] }
    case 'LessThan':
      return { field, op: 'lt', values: [from!] }
    case 'LessThanOrEqual':
      return { field, op: 'lt', values: [to] }
    default:
      return refuse()
  }
}

function allowedFor(kind: 'text' | 'number' | 'boolean' | 'date'): string[] {
  if (kind === 'text') return ['Exact', 'NotExact', 'Contains', 'NotContains', 'StartsWith', 'EndsWith']
  if (kind === 'boolean') return ['Exact', 'NotExact']
  return ['Exact', 'NotExact', 'GreaterThan', 'GreaterThanOrEqual', 'LessThan', 'LessThanOrEqual']
}

/**
 * Filters in `index` order (then as given), each joined to the ones before it by its `op`
 * (AND, the default, or OR; the first one's is ignored). AND binds tighter than OR, as in
 * SQL: `a AND b OR c` is `(a AND b) OR c`. Answers the OR of AND-groups.
 */
export function conditionGroups(filters: readonly (FilterInput | null)[] | null | undefined, name: string): Condition[][] {
  if (!filters) return []
  if (filters.length > MAX_FILTERS) throw new AssetQueryError(name, `has ${filters.length} filters: at most ${MAX_FILTERS}`)
  const ordered = filters
    .map((f, i) => ({ f, i }))
    .filter((x): x is { f: FilterInput; i: number } => x.f !== null)
    .sort((x, y) => (x.f.index ?? x.i) - (y.f.index ?? y.i) || x.i - y.i)
  const groups: Condition[][] = []
  for (const [n, { f, i }] of ordered.entries()) {
    const at = `${name}[${i}]`
    const op = (f.op ?? 'AND').trim().toUpperCase()
    if (op !== 'AND' && op !== 'OR') throw new AssetQueryError(`${at}.op`, `must be AND or OR, not "${String(f.op).slice(0, 20)}"`)
    const c = condition(f, at)
    if (n === 0 || op === 'OR') groups.push([c])
    else groups[groups.length - 1].push(c)
  }
  return groups
}

/** `<field>_<asc|desc>` over SORT_FIELDS. */
export function assetSort(value: string | null | undefined, fallback: string, at: string): AssetSort {
  const raw = value?.trim() || fallback
  const m = /^(.+)_(asc|desc)$/i.exec(raw)
  const field = m ? byLower(SORT_FIELDS, m[1]) : undefined
  if (!m || !field) throw new AssetQueryError(at, `must be <field>_asc or <field>_desc with a field of: ${SORT_FIELDS.join(', ')}`)
  return { field, direction: m[2].toLowerCase() as AssetSort['direction'] }
}

/** A global search term as a LIKE pattern (undefined when empty). */
export function searchPattern(value: string | null | undefined, at: string): string | undefined {
  const v = value?.trim()
  if (!v) return undefined
  if (v.length > 256) throw new AssetQueryError(at, 'is longer than 256 characters')
  if (v.includes('\u0000')) throw new AssetQueryError(at, 'must not contain the NUL character')
  return contains(v)
}
