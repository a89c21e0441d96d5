import type { JSX } from 'preact'

/** The part of a JSON Schema the form understands; anything else is edited as JSON. */
export interface JsonSchema {
  type?: string | string[]
  properties?: Record<string, JsonSchema>
  required?: string[]
  description?: string
  enum?: unknown[]
  default?: unknown
  items?: JsonSchema
  maxLength?: number
}

/** A string a schema allows to be this long is text to write (a script's code): a text area from the start. */
const TEXT_AREA_CHARS = 1000

function typeOf (schema: JsonSchema): string {
  const t = Array.isArray(schema.type) ? schema.type.find((x) => x !== 'null') : schema.type
  return t ?? (schema.enum !== undefined ? 'enum' : 'json')
}

/** Whether the form can show every property of the schema as a simple field. */
export function formFits (schema: JsonSchema | undefined): boolean {
  return schema !== undefined && (schema.type === 'object' || schema.properties !== undefined)
}

function Field ({ name, schema, required, value, onChange }: {
  name: string
  schema: JsonSchema
  required: boolean
  value: unknown
  onChange: (v: unknown) => void
}): JSX.Element {
  const type = typeOf(schema)
  const label = <span>{name}{required ? <span class='req' title='required'> *</span> : null} <span class='muted'>{type}</span></span>
  const help = schema.description !== undefined ? <small class='muted'>{schema.description}</small> : null
  if (schema.enum !== undefined) {
    return (
      <label data-arg={name}>{label}
        <select
          name={name}
          value={value === undefined ? '' : JSON.stringify(value)}
          onChange={(e) => onChange(e.currentTarget.value === '' ? undefined : JSON.parse(e.currentTarget.value))}
        >
          <option value=''>—</option>
          {schema.enum.map((v) => <option key={JSON.stringify(v)} value={JSON.stringify(v)}>{String(v)}</option>)}
        </select>{help}
      </label>
    )
  }
  if (type === 'boolean') {
    return (
      <label data-arg={name} class='check'>
        <select
          name={name}
          value={value === undefined ? '' : String(value)}
          onChange={(e) => onChange(e.currentTarget.value === '' ? undefined : e.currentTarget.value === 'true')}
        >
          <option value=''>—</option><option value='true'>true</option><option value='false'>false</option>
        </select> {label}{help}
      </label>
    )
  }
  if (type === 'number' || type === 'integer') {
    return (
      <label data-arg={name}>{label}
        <input
          name={name} inputMode='decimal' value={value === undefined ? '' : String(value)} onInput={(e) => {
            const text = e.currentTarget.value.trim()
            onChange(text === '' ? undefined : Number.isNaN(Number(text)) ? text : Number(text))
          }}
        />{help}
      </label>
    )
  }
  if (type === 'string') {
    const written = typeof value === 'string' && (value.includes('\n') || value.length > 80)
    const long = written || (schema.maxLength ?? 0) > TEXT_AREA_CHARS
    return (
      <label data-arg={name}>{label}
        {long
          ? <textarea
              name={name} rows={written || (schema.maxLength ?? 0) <= TEXT_AREA_CHARS ? 4 : 10} value={typeof value === 'string' ? value : ''}
              onInput={(e) => onChange(e.currentTarget.value === '' ? undefined : e.currentTarget.value)}
            />
          : <input
              name={name}
              value={typeof value === 'string' ? value : ''}
              onInput={(e) => onChange(e.currentTarget.value === '' ? undefined : e.currentTarget.value)}
            />}
        {help}
      </label>
    )
  }
  // Objects, arrays and anything else: JSON text; kept as text until it parses.
  const text = value === undefined ? '' : typeof value === 'string' && type !== 'string' ? value : JSON.stringify(value)
  return (
    <label data-arg={name}>{label}
      <textarea
        name={name} rows={2} value={text} placeholder={type === 'array' ? '[ … ]' : '{ … }'} onInput={(e) => {
          const t = e.currentTarget.value
          if (t.trim() === '') { onChange(undefined); return }
          try { onChange(JSON.parse(t)) } catch { onChange(t) }
        }}
      />{help}
    </label>
  )
}

/** A simple form from a tool's input schema: one field per top-level property. */
export function SchemaForm ({ schema, value, onChange }: {
  schema: JsonSchema
  value: Record<string, unknown>
  onChange: (v: Record<string, unknown>) => void
}): JSX.Element {
  const props = Object.entries(schema.properties ?? {})
  if (props.length === 0) return <p class='muted'>This tool takes no arguments.</p>
  return (
    <div class='schema-form'>
      {props.map(([name, s]) => (
        <Field
          key={name} name={name} schema={s} required={(schema.required ?? []).includes(name)} value={value[name]} onChange={(v) => {
            const next = { ...value }
            if (v === undefined) delete next[name]
            else next[name] = v
            onChange(next)
          }}
        />
      ))}
    </div>
  )
}
