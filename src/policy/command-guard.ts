/**
 * Tests bash commands against a policy's `bash.denyCommands` off the event loop. The rules are
 * the operator's regular expressions, the command is the tenant's (the model's) text, and V8's
 * RegExp backtracks: a careless rule such as `(\s*rm\s*)+x` over a crafted command would run for
 * minutes and cannot be interrupted from inside. So, like grep's regex worker, matching runs in a
 * worker thread with a time budget; past it the worker is terminated (that stops a running
 * RegExp), replaced, and the call is refused: a check that cannot finish never lets a command
 * through.
 *
 * One worker, one check at a time: a check is a few regex tests over one string (microseconds),
 * so a queue costs nothing in practice, and a hostile command only ever holds the worker for
 * one budget. The worker is plain JavaScript evaluated from a string, because worker threads do
 * not inherit tsx's TypeScript loader.
 */
import { Worker } from 'node:worker_threads'

/** Wall-clock budget of one check. */
const COMMAND_CHECK_BUDGET_MS = 250

const WORKER_SOURCE = `
'use strict'
const { parentPort } = require('node:worker_threads')
// Compiled rule sets by key (a policy's rules joined), kept for the policies in use.
const compiled = new Map()
parentPort.on('message', (msg) => {
  try {
    let rules = compiled.get(msg.key)
    if (rules === undefined) {
      rules = msg.sources.map((s) => new RegExp(s))
      if (compiled.size >= 256) compiled.delete(compiled.keys().next().value)
      compiled.set(msg.key, rules)
    }
    let index = -1
    for (let i = 0; i < rules.length; i++) {
      if (rules[i].test(msg.text)) { index = i; break }
    }
    parentPort.postMessage({ id: msg.id, index })
  } catch (err) {
    parentPort.postMessage({ id: msg.id, error: String(err && err.message || err) })
  }
})
`

export class CommandCheckTimeout extends Error {
  constructor (budgetMs: number) {
    super(`the policy check of the command did not finish within ${budgetMs} ms`)
    this.name = 'CommandCheckTimeout'
  }
}

interface Job {
  key: string
  sources: readonly string[]
  text: string
  resolve: (index: number) => void
  reject: (err: Error) => void
}

export class CommandGuard {
  readonly #budgetMs: number
  #worker: Worker | undefined
  /** Whether #worker has started: its start-up (tens of ms on a busy host) is not part of a budget. */
  #online = false
  #queue: Job[] = []
  #running: { job: Job, id: number, timer: NodeJS.Timeout | undefined } | undefined
  #nextId = 1
  #closed = false

  constructor (opts: { budgetMs?: number } = {}) {
    this.#budgetMs = opts.budgetMs ?? COMMAND_CHECK_BUDGET_MS
  }

  /**
   * The index of the first rule that matches `text`, or -1. `key` identifies the rule set (the
   * worker compiles each set once). Rejects with CommandCheckTimeout past the budget.
   */
  async firstMatch (key: string, sources: readonly string[], text: string): Promise<number> {
    if (sources.length === 0) return -1
    if (this.#closed) throw new Error('the command guard is closed')
    return await new Promise<number>((resolve, reject) => {
      this.#queue.push({ key, sources, text, resolve, reject })
      this.#pump()
    })
  }

  #spawn (): Worker {
    const worker = new Worker(WORKER_SOURCE, { eval: true })
    // The worker must never keep the process alive (shutdown closes it anyway).
    worker.unref()
    this.#online = false
    worker.once('online', () => {
      if (this.#worker !== worker) return
      this.#online = true
      const running = this.#running
      if (running !== undefined && running.timer === undefined) running.timer = this.#budgetTimer(running.id)
    })
    worker.on('message', (msg: { id: number, index?: number, error?: string }) => {
      const running = this.#running
      if (running === undefined || running.id !== msg.id) return
      clearTimeout(running.timer)
      this.#running = undefined
      if (msg.error !== undefined) running.job.reject(new Error(msg.error))
      else running.job.resolve(msg.index ?? -1)
      this.#pump()
    })
    worker.on('error', (err: Error) => { this.#fail(worker, err) })
    worker.on('exit', () => { this.#fail(worker, new Error('the command check worker exited')) })
    return worker
  }

  /** The worker died or was terminated: the running check fails, the next one gets a new worker. */
  #fail (worker: Worker, err: Error): void {
    if (this.#worker !== worker) return
    this.#worker = undefined
    const running = this.#running
    if (running !== undefined) {
      clearTimeout(running.timer)
      this.#running = undefined
      running.job.reject(err)
    }
    this.#pump()
  }

  #pump (): void {
    if (this.#running !== undefined || this.#closed) return
    const job = this.#queue.shift()
    if (job === undefined) return
    this.#worker ??= this.#spawn()
    const worker = this.#worker
    const id = this.#nextId++
    this.#running = { job, id, timer: this.#online ? this.#budgetTimer(id) : undefined }
    worker.postMessage({ id, key: job.key, sources: job.sources, text: job.text })
  }

  /** Past the budget, the running check fails and its worker is terminated (that stops a running RegExp). */
  #budgetTimer (id: number): NodeJS.Timeout {
    return setTimeout(() => {
      const running = this.#running
      const worker = this.#worker
      if (running?.id !== id) return
      this.#running = undefined
      this.#worker = undefined
      running.job.reject(new CommandCheckTimeout(this.#budgetMs))
      worker?.terminate().catch(() => {})
      this.#pump()
    }, this.#budgetMs)
  }

  async close (): Promise<void> {
    this.#closed = true
    const pending = [...this.#queue, ...(this.#running ? [this.#running.job] : [])]
    if (this.#running) clearTimeout(this.#running.timer)
    this.#queue = []
    this.#running = undefined
    for (const job of pending) job.reject(new Error('the command guard is closed'))
    const worker = this.#worker
    this.#worker = undefined
    await worker?.terminate()
  }
}
