import { test } from 'node:test'
import assert from 'node:assert/strict'
import { isQueryCredentialName, isSecretName } from '../../../src/secrets/names.js'

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
