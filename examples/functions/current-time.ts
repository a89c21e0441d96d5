import { defineFunction } from '../../src/authoring.js'

/** The current date and time in an IANA time zone: models do not know "now". */
export const currentTime = defineFunction<{ timeZone?: string }>({
  name: 'current_time',
  description: 'Get the current date and time in an IANA time zone (for example Europe/Paris, America/New_York, UTC).',
  parameters: {
    type: 'object',
    properties: {
      timeZone: { type: 'string', description: 'IANA time zone name; defaults to UTC', maxLength: 64 }
    },
    additionalProperties: false
  },
  handler: ({ timeZone = 'UTC' }) => {
    let format: Intl.DateTimeFormat
    try {
      format = new Intl.DateTimeFormat('en-CA', {
        timeZone,
        year: 'numeric',
        month: '2-digit',
        day: '2-digit',
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
        hourCycle: 'h23',
        weekday: 'long',
        timeZoneName: 'longOffset'
      })
    } catch {
      throw new Error(`Unknown time zone '${timeZone}'. Use an IANA name such as Europe/Berlin or UTC.`)
    }
    const now = new Date()
    const parts = Object.fromEntries(format.formatToParts(now).map((p) => [p.type, p.value]))
    const offset = parts.timeZoneName === 'GMT' ? '+00:00' : String(parts.timeZoneName).replace('GMT', '')
    return {
      timeZone,
      localDateTime: `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}:${parts.second}${offset}`,
      weekday: parts.weekday,
      utc: now.toISOString(),
      unixSeconds: Math.floor(now.getTime() / 1000)
    }
  }
})
