import type { Server } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'

/**
 * Listens on a free loopback port and tracks the open sockets, so a faulty server's close can
 * destroy connections the gateway holds open (keep-alive, a stalled stream).
 */
export async function listenTracked (server: Server): Promise<{ port: number, sockets: Set<Socket> }> {
  const sockets = new Set<Socket>()
  server.on('connection', (socket: Socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject)
      resolve()
    })
  })
  return { port: (server.address() as AddressInfo).port, sockets }
}
