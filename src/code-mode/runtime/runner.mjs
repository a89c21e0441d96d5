// Code mode's JavaScript runner (SPEC 19). It runs INSIDE the tenant's sandbox, on the sandbox's
// own `node`, read-only: `node runner.mjs <call dir>`. The call directory holds the script
// (`script.js`), the call's token (`token`) and the gateway's socket (`tools.sock`). The script is
// the body of an async function with `tools` in scope; what it returns is its result.
// Protocol (src/code-mode/frames.ts): 4-byte big-endian length + UTF-8 JSON-RPC 2.0 message.
import { readFileSync } from 'node:fs'
import { connect } from 'node:net'
import { join } from 'node:path'

const dir = process.argv[2]
const token = readFileSync(join(dir, 'token'), 'utf8').trim()
const code = readFileSync(join(dir, 'script.js'), 'utf8')

/** A tool call that failed: `code` is the gateway's (GW_...), `callId` the inner call's journal id. */
class ToolError extends Error {
  constructor (message, code, callId) {
    super(message)
    this.name = 'ToolError'
    this.code = code
    this.callId = callId
  }
}

const socket = connect(join(dir, 'tools.sock'))
socket.on('error', () => {})
const pending = new Map()
let nextId = 1
let buffered = Buffer.alloc(0)

function send (message) {
  const body = Buffer.from(JSON.stringify(message), 'utf8')
  const header = Buffer.alloc(4)
  header.writeUInt32BE(body.length, 0)
  socket.write(Buffer.concat([header, body]))
}

socket.on('data', (chunk) => {
  buffered = Buffer.concat([buffered, chunk])
  while (buffered.length >= 4) {
    const length = buffered.readUInt32BE(0)
    if (buffered.length < 4 + length) break
    const message = JSON.parse(buffered.toString('utf8', 4, 4 + length))
    buffered = buffered.subarray(4 + length)
    const waiter = pending.get(message.id)
    if (waiter === undefined) continue
    pending.delete(message.id)
    if (message.error !== undefined) waiter.reject(new ToolError(message.error.message, message.error.data?.code ?? 'GW_SCRIPT_LIMIT', null))
    else waiter.resolve(message.result)
  }
})

socket.on('close', () => {
  for (const waiter of pending.values()) waiter.reject(new ToolError('The gateway closed the tools socket', 'GW_SCRIPT_LIMIT', null))
  pending.clear()
})

/** One tool call: the parsed output (JSON when it is JSON, else the text), or a ToolError. */
async function call (name, args) {
  if (args === undefined || args === null) args = {}
  if (typeof args !== 'object' || Array.isArray(args)) throw new TypeError(`tools.${name} takes one object of arguments`)
  const id = nextId++
  const answer = await new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject })
    send({ jsonrpc: '2.0', id, method: 'tools/call', params: { token, name, arguments: args } })
  })
  if (answer.isError) {
    const error = answer.error ?? { code: 'GW_TOOL_ERROR', message: answer.output }
    throw new ToolError(`${name}: ${error.message}`, error.code, answer.callId)
  }
  try {
    return JSON.parse(answer.output)
  } catch {
    return answer.output
  }
}

const tools = new Proxy({}, {
  get: (_, name) => {
    if (typeof name !== 'string' || name === 'then') return undefined
    return async (args) => await call(name, args)
  }
})

function serialisable (value) {
  if (value === undefined) return null
  try {
    JSON.stringify(value)
    return value
  } catch {
    return String(value)
  }
}

let finished = false

/**
 * Sends the script's one answer and exits once the gateway has read it. Only the first answer
 * counts: a second (a rejection left unhandled after the script already failed) is dropped. The
 * exit waits for the gateway to close its end, which it does once it has read ours to its end
 * (after the answer): exiting as soon as the answer was written let an answer to a call still in
 * flight meet a closed peer, and the gateway's failed write closed its socket with the script's
 * answer unread ("exited with status 1 before it answered", seen under load).
 */
function finish (message, exitCode) {
  if (finished) return
  finished = true
  if (socket.destroyed) process.exit(exitCode)
  socket.once('close', () => process.exit(exitCode))
  send(message)
  socket.end()
  // The gateway may be gone or never close: exit anyway.
  setTimeout(() => process.exit(exitCode), 2000).unref()
}

process.on('unhandledRejection', (err) => {
  finish({ jsonrpc: '2.0', method: 'script/error', params: { token, message: err?.stack ?? String(err) } }, 1)
})

socket.once('connect', async () => {
  try {
    const AsyncFunction = (async () => {}).constructor
    const main = new AsyncFunction('tools', 'ToolError', code)
    const value = await main(tools, ToolError)
    finish({ jsonrpc: '2.0', method: 'script/result', params: { token, value: serialisable(value) } }, 0)
  } catch (err) {
    const where = err instanceof ToolError ? ` (${err.code}${err.callId ? `, call ${err.callId}` : ''})` : ''
    finish({ jsonrpc: '2.0', method: 'script/error', params: { token, message: `${err?.stack ?? String(err)}${where}` } }, 1)
  }
})
