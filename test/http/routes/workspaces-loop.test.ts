// The workspace routes other than uploads (tenancy, checkpoints, delete, concurrency, the idle
// sweeper, a restart, first run, downloads) with the quota in the file system
// (WORKSPACE_QUOTA_MODE=loop: a loop-mounted ext4 image per workspace,
// docs/ARCHITECTURE.md#workspace-quota). The tests are in test/helpers/workspace-routes.ts
// (workspaces.test.ts runs them in watchdog mode, workspaces-loop-uploads.test.ts the uploads).
// Needs root and mkfs.ext4: skipped without them, a failure under CI=true.
import { workspaceRouteSuite } from '../../helpers/workspace-routes.js'

workspaceRouteSuite('loop', ['lifecycle'])
