// The workspace routes' uploads and downloads with the quota in the file system
// (WORKSPACE_QUOTA_MODE=loop: a loop-mounted ext4 image per workspace,
// docs/ARCHITECTURE.md#workspace-quota). The tests are in test/helpers/workspace-routes.ts
// (workspaces.test.ts runs them in watchdog mode). Needs root and mkfs.ext4: skipped without
// them, a failure under CI=true.
import { workspaceRouteSuite } from '../../helpers/workspace-routes.js'

workspaceRouteSuite('loop', ['uploads'])
