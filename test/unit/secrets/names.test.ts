import { test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { classifyWords, isQueryCredentialName, isSecretName } from '../../../src/secrets/names.js'

test('secret names: prefixes and suffixes, and names that only look close', () => {
  for (const k of [
    'token', 'access_token', 'refreshToken', 'id-token', 'GITHUB_TOKEN', 'password', 'db_password', 'DB_PASSWORD', 'PGPASSWORD', 'PASSWD', 'MYSQL_PWD',
    'db_pass', 'secret', 'client_secret', 'Authorization', 'proxy-authorization', 'api_key', 'apiKey', 'X-Api-Key', 'API KEY', 'access_key',
    'awsAccessKeyId', 'aws_secret_access_key', 'private_key', 'privateKey', 'cookie', 'Set-Cookie', 'credentials', 'session_id', 'basic_auth', 'auth',
    'pwd', '--db-password', 'X-Amz-Signature', 'sig', 'user_pin'
  ]) {
    assert.equal(isSecretName(k), true, k)
  }
  for (const k of [
    'max_tokens', 'maxToken', 'next_page_token', 'tokenizer', 'token_type', 'author', 'path', 'command', 'key', 'keys', 'name', 'description',
    'passage', 'monkey', 'password_field', 'passwordHint', 'secret_name', 'bypass', 'function_signature', 'GIT_ASKPASS', 'credentials_file', 'auth_url'
  ]) {
    assert.equal(isSecretName(k), false, k)
  }
  for (const q of ['api_key', 'key', 'Client%5FSecret', 'X-Amz-Signature', 'sig', 'token%ZZ']) assert.equal(isQueryCredentialName(q), true, q)
  for (const q of ['page', 'sort', 'userId', '%E0%A4%A']) assert.equal(isQueryCredentialName(q), false, q)
})

test('the quick test of a name\'s ending rules out only names its words would: the same verdict on random names', () => {
  // Pieces of secret names and of names that only look close, separators, case, digits and characters that lower-case
  // to a-z or to two characters (the Kelvin sign, U+0130).
  const pieces = ['pass', 'Word', 'PASSWD', 'secret', 'Token', 'api', 'KEY', 'key', 'id', 'auth', 'Cookie', 's', 'sig', 'Signature', 'x', 'amz',
    'pin', 'otp', 'jwt', 'bearer', 'max', 'page', 'cred', 'ential', 'session', '_', '-', '.', ' ', '9', 'K', '\u212A', '\u0130', 'ß', 'é']
  fc.assert(fc.property(fc.array(fc.constantFrom(...pieces), { maxLength: 6 }), (parts) => {
    const name = parts.join('')
    assert.equal(isSecretName(name), classifyWords(name), JSON.stringify(name))
  }), { numRuns: 20_000, seed: 20261207 })
  // Both verdicts were reached, and the Kelvin sign reads as k ("api\u212Aey" is apiKey) either way.
  assert.equal(isSecretName('api\u212Aey'), true)
  assert.equal(isSecretName('db_pass_word'), true)
  assert.equal(isSecretName('monkey9'), false)
})
