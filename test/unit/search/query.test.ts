/**
 * Query analysis of tool search (src/search/query.ts): the words a query's shapes imply, addresses
 * kept out of its words, questions told from requests, tools that only read told from the others;
 * and what each of these changes in a ranking (src/search/tool-index.ts).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { ToolIndex, toolDocument } from '../../../src/search/index.js'
import { asksToChange, isQuestion, queryHints, readsOnly, withoutAddresses } from '../../../src/search/query.js'
import { processTerm, synonymsOf } from '../../../src/search/text.js'

const stem = (w: string): string => processTerm(w) as string

test('shapes: a file name, a media file, a path, an address, an e-mail address, a time of day, a question\'s answer type', () => {
  assert.deepEqual(queryHints('read config.yaml please'), [['file']])
  assert.deepEqual(queryHints('show me vacation.PNG'), [[stem('file'), stem('image'), stem('media')]])
  assert.deepEqual(queryHints('play recording.wav'), [[stem('file'), stem('audio'), stem('media')]])
  assert.deepEqual(queryHints('replace ~/notes/todo.md'), [['file'], ['path']], 'one file is said once: the path adds only "path"')
  assert.deepEqual(queryHints('open example.com'), [['url', 'web']])
  assert.deepEqual(queryHints('summarize https://example.org/posts/x'), [['url', 'web']])
  assert.deepEqual(queryHints('mail finance@example.com the report'), [[stem('email'), 'mail']], 'an e-mail address is no web address')
  assert.deepEqual(queryHints('move the standup to 10am'), [['time']])
  assert.deepEqual(queryHints('how far is Boston from here'), [[stem('distance')]])
  assert.deepEqual(queryHints('how high above sea level is Denver'), [[stem('height'), stem('elevation')]])
  assert.deepEqual(queryHints('list the open issues'), [], 'most queries have no shape')
  assert.deepEqual(queryHints('version 1.2.3 of the package'), [], 'a version number is no file name')
})

test('an address\'s words are not the query\'s: example, com and posts say nothing about the tool', () => {
  assert.equal(withoutAddresses('open example.com in the browser').split(/\s+/).join(' '), 'open in the browser')
  assert.equal(withoutAddresses('fetch https://example.org/posts/rate-limits now').split(/\s+/).join(' '), 'fetch now')
  assert.equal(withoutAddresses('email finance@example.com').trim(), 'email')
  assert.equal(withoutAddresses('read config.yaml'), 'read config.yaml', 'a file name stays: its words may name the tool\'s subject')
})

test('questions and requests', () => {
  for (const q of ['what did I commit since Monday', 'Which PRs touched auth', 'who reviewed PR 8', 'is there an issue about the crash',
    'has anyone committed a password', 'how big is that object', 'the size of that object?']) {
    assert.equal(isQuestion(q), true, q)
  }
  for (const q of ['create an issue', 'can you add alice as a reviewer?', 'how do I create a branch', 'please delete the file',
    'how to rename a page', 'show the open PRs']) {
    assert.equal(isQuestion(q), false, q)
  }
})

test('requests to change something: the first word that is no stop word is a verb that changes', () => {
  for (const q of ['add alice as a reviewer', 'Please delete the old branch', 'create an issue', 'push the files']) assert.equal(asksToChange(q), true, q)
  for (const q of ['show the open PRs', 'list my repos', 'the standup notes', 'get the file', '']) assert.equal(asksToChange(q), false, q)
})

test('tools that only read: the readOnlyHint when given, else the first verb of the name', () => {
  assert.equal(readsOnly('create_issue', { readOnlyHint: true }), true, 'the hint wins over the name')
  assert.equal(readsOnly('issue_read', { readOnlyHint: false }), false)
  for (const name of ['get_pull_request', 'list_pull_requests', 'get_commit', 'slack_get_thread_replies', 'maps_elevation', 'searchIssues']) {
    assert.equal(readsOnly(name, undefined), true, name)
  }
  for (const name of ['create_pull_request', 'git_commit', 'slack_post_message', 'puppeteer_click', 'deleteFile', 'request_reviewers']) {
    assert.equal(readsOnly(name, {}), false, name)
  }
})

test('the verb classes of tool APIs: a word reaches its class', () => {
  const has = (word: string, other: string): boolean => synonymsOf(stem(word)).includes(stem(other))
  assert.ok(has('forget', 'delete'))
  assert.ok(has('compare', 'diff'))
  assert.ok(has('open', 'navigate'))
  assert.ok(has('kick', 'trigger'))
  assert.ok(has('answer', 'reply'))
  assert.ok(has('elevation', 'altitude'))
  assert.ok(has('retry', 'rerun'), 'a tool name\'s word (actions_run_rerun) and the everyday word for it')
  assert.ok(has('vulnerability', 'dependabot'))
  assert.ok(!has('forget', 'create'), 'classes do not bleed into each other')
})

const TOOLS = [
  { name: 'read_text_file', description: 'Read a text file from disk', inputSchema: { properties: { path: { description: 'Where the file is' } } } },
  { name: 'read_media_file', description: 'Read an image or audio file and return it as base64', inputSchema: {} },
  { name: 'navigate', description: 'Navigate the browser to a URL', inputSchema: { properties: { url: {} } } },
  { name: 'create_example', description: 'Create an example com object', inputSchema: {} },
  { name: 'list_commits', description: 'List the commits of a branch', inputSchema: {}, annotations: { readOnlyHint: true } },
  { name: 'create_commit', description: 'Create a commit on a branch', inputSchema: {} },
  { name: 'get_object_metadata', description: 'Metadata of an object in a bucket', inputSchema: {} },
  { name: 'put_object', description: 'Upload an object to a bucket', inputSchema: {} },
  { name: 'list_reviewers', description: 'The reviewers of a pull request', inputSchema: {}, annotations: { readOnlyHint: true } },
  { name: 'set_reviewers', description: 'Reviewers of a pull request: set them', inputSchema: {} }
]
const index = ToolIndex.buildNow(TOOLS.map((t) => toolDocument(t, 'srv')))
const top = (q: string): string | undefined => TOOLS[index.searchText(q, 1)[0]?.index ?? -1]?.name

test('ranking: a file name finds a file tool, an image its media tool, an address the browser; a question a tool that reads', () => {
  assert.equal(top('show notes.md'), 'read_text_file')
  assert.equal(top('show vacation.png'), 'read_media_file')
  assert.equal(top('go to example.com'), 'navigate', 'not the tool whose words are the address\'s')
  assert.equal(index.searchText('https://example.com', 5).length > 0, true, 'an address alone still searches')
  assert.equal(top('which commits are on the release branch'), 'list_commits')
  assert.equal(top('commits on the release branch'), 'create_commit', 'without the question the name\'s own words lead')
  assert.equal(top('how big is that object in the bucket'), 'get_object_metadata')
  assert.equal(top('that object in the bucket'), 'put_object', 'the question\'s answer type and intent decide')
  assert.equal(top('reviewers of the pull request'), 'list_reviewers')
  assert.equal(top('add reviewers to the pull request'), 'set_reviewers', 'a request to change something: the tool that changes')
})
