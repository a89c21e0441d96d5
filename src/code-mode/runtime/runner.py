# Code mode's Python runner (SPEC 19). It runs INSIDE the tenant's sandbox, on the sandbox's own
# python3, read-only: `python3 -I -B runner.py <call dir>`. The call directory holds the script
# (`script.py`), the call's token (`token`), the listed tool names (`names.json`) and the gateway's
# socket (`tools.sock`). The script runs with `tools` in scope; its `result` variable is its result.
# Protocol (src/code-mode/frames.ts): 4-byte big-endian length + UTF-8 JSON-RPC 2.0 message.
import json
import os
import socket
import struct
import sys
import traceback

call_dir = sys.argv[1]
with open(os.path.join(call_dir, 'token'), encoding='utf-8') as f:
    TOKEN = f.read().strip()
with open(os.path.join(call_dir, 'script.py'), encoding='utf-8') as f:
    CODE = f.read()
with open(os.path.join(call_dir, 'names.json'), encoding='utf-8') as f:
    NAMES = json.load(f)
with open(os.path.join(call_dir, 'api.py'), encoding='utf-8') as f:
    API = f.read()


class ToolError(Exception):
    """A tool call that failed: `code` is the gateway's (GW_...), `call_id` the inner call's journal id."""

    def __init__(self, message, code, call_id=None):
        super().__init__(message)
        self.code = code
        self.call_id = call_id


_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
_sock.connect(os.path.join(call_dir, 'tools.sock'))
_next_id = [1]


def _send(message):
    body = json.dumps(message).encode('utf-8')
    _sock.sendall(struct.pack('>I', len(body)) + body)


def _read_exact(n):
    chunks = []
    while n > 0:
        chunk = _sock.recv(min(n, 1 << 16))
        if not chunk:
            raise ToolError('The gateway closed the tools socket', 'GW_SCRIPT_LIMIT')
        chunks.append(chunk)
        n -= len(chunk)
    return b''.join(chunks)


def _receive():
    (length,) = struct.unpack('>I', _read_exact(4))
    return json.loads(_read_exact(length).decode('utf-8'))


def _call(name, args):
    request_id = _next_id[0]
    _next_id[0] += 1
    _send({'jsonrpc': '2.0', 'id': request_id, 'method': 'tools/call',
           'params': {'token': TOKEN, 'name': name, 'arguments': args}})
    while True:
        message = _receive()
        if message.get('id') == request_id:
            break
    if 'error' in message:
        error = message['error']
        raise ToolError(error.get('message'), (error.get('data') or {}).get('code', 'GW_SCRIPT_LIMIT'))
    answer = message['result']
    if answer.get('isError'):
        error = answer.get('error') or {'code': 'GW_TOOL_ERROR', 'message': answer.get('output')}
        raise ToolError('%s: %s' % (name, error.get('message')), error.get('code'), answer.get('callId'))
    try:
        return json.loads(answer['output'])
    except ValueError:
        return answer['output']


def _python_name(name):
    out = ''.join(c if c.isalnum() or c == '_' else '_' for c in name)
    return out


class _Tools:
    """`tools.<name>(**args)`: a name with characters Python does not allow is reachable with '_' in their place."""

    def __init__(self, names):
        self._by_python_name = {}
        for name in names:
            self._by_python_name.setdefault(_python_name(name), name)

    def call(self, name, args=None, **kwargs):
        merged = dict(args or {})
        merged.update(kwargs)
        return _call(name, merged)

    def __repr__(self):
        return API

    def __getattr__(self, attr):
        if attr.startswith('__'):
            raise AttributeError(attr)
        name = self._by_python_name.get(attr, attr)
        return lambda args=None, **kwargs: self.call(name, args, **kwargs)


def _serialisable(value):
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


def main():
    scope = {'__name__': '__main__', 'tools': _Tools(NAMES), 'ToolError': ToolError}
    try:
        exec(compile(CODE, '<script>', 'exec'), scope)
    except SystemExit as err:
        if err.code not in (None, 0):
            _send({'jsonrpc': '2.0', 'method': 'script/error', 'params': {'token': TOKEN, 'message': 'SystemExit(%r)' % (err.code,)}})
            sys.stdout.flush()
            return 1
    except BaseException as err:  # noqa: B902 - the script's failure, whatever it is, is reported
        where = ' (%s%s)' % (err.code, ', call %s' % err.call_id if err.call_id else '') if isinstance(err, ToolError) else ''
        _send({'jsonrpc': '2.0', 'method': 'script/error',
               'params': {'token': TOKEN, 'message': traceback.format_exc() + where}})
        sys.stdout.flush()
        return 1
    _send({'jsonrpc': '2.0', 'method': 'script/result',
           'params': {'token': TOKEN, 'value': _serialisable(scope.get('result'))}})
    sys.stdout.flush()
    return 0


sys.exit(main())
