import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import type { Services } from '../src/services.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The domain: routes call one method of it per operation. */
    services: Services
  }
}

/** Decorates the app with the domain services and closes them when the app closes. */
export default fp(async function servicesPlugin (app: FastifyInstance, opts: { services: Services }) {
  app.decorate('services', opts.services)
  app.addHook('onClose', async () => {
    await opts.services.close()
  })
}, { name: 'gateway-services' })
