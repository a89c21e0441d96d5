import neostandard from 'neostandard'

export default [
  ...neostandard({ ts: true, ignores: ['dist/**', 'console/dist/**', 'node_modules/**', 'data/**', 'test/fixtures/apply-patch-scenarios/**'] })
]
