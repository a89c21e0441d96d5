// The workspace routes with the quota kept by the watchdog (plain directories). The tests are in
// test/helpers/workspace-routes.ts; workspaces-loop-uploads.test.ts and workspaces-loop.test.ts
// run them in loop mode.
import { workspaceRouteSuite } from '../../helpers/workspace-routes.js'

workspaceRouteSuite('watchdog')
