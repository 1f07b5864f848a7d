// memjs (Node, binary protocol, SASL PLAIN) against the server named by
// NDBGATE_MEMCACHE. With NDBGATE_SASL=user:password the server requires SASL.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const memjs = require('memjs');

const addr = process.env.NDBGATE_MEMCACHE;
// The largest value the server stores (tests/e2e sets it: 1 MiB, or less on NDB).
const valueMax = Number(process.env.NDBGATE_TEST_VALUE_MAX || 1048576);
const sasl = process.env.NDBGATE_SASL;
const [username, password] = sasl ? sasl.split(':') : [undefined, undefined];

function client(opts) {
  return memjs.Client.create(addr, { timeout: 5, retries: 0, logger: { log() {} }, username, password, ...opts });
}

test('binary set, get, add, replace, delete', { skip: !addr }, async () => {
  const c = client();
  try {
    await c.flush();
    assert.equal((await c.get('js:none')).value, null);
    assert.equal(await c.set('js:a', 'hello', { expires: 0 }), true);
    const got = await c.get('js:a');
    assert.equal(got.value.toString(), 'hello');
    assert.equal(await c.add('js:a', 'x'), false);
    assert.equal(await c.add('js:b', 'x'), true);
    assert.equal(await c.replace('js:none', 'x'), false);
    assert.equal(await c.replace('js:b', 'y'), true);
    assert.equal((await c.get('js:b')).value.toString(), 'y');
    assert.equal(await c.delete('js:b'), true);
    assert.equal(await c.delete('js:b'), false);
  } finally {
    c.close();
  }
});

test('binary append, prepend, counters, touch, big values', { skip: !addr }, async () => {
  const c = client();
  try {
    await c.set('js:s', 'mid');
    assert.equal(await c.append('js:s', '>'), true);
    // memjs 1.3.2's prepend sends the APPEND opcode (0x0e), so it appends.
    assert.equal(await c.prepend('js:s', '<'), true);
    assert.equal((await c.get('js:s')).value.toString(), 'mid><');
    // increment with an initial value creates the counter, then adds
    let r = await c.increment('js:n', 5, { initial: 10 });
    assert.equal(r.value, 10);
    r = await c.increment('js:n', 5, {});
    assert.equal(r.value, 15);
    r = await c.decrement('js:n', 100, {});
    assert.equal(r.value, 0);
    assert.equal(await c.touch('js:s', 100), true);
    assert.equal(await c.touch('js:none', 100), false);
    const big = Buffer.alloc(Math.min(500 * 1024, valueMax - 100), 'z');
    assert.equal(await c.set('js:big', big), true);
    assert.deepEqual((await c.get('js:big')).value, big);
    await assert.rejects(c.set('js:huge', Buffer.alloc(2 * 1024 * 1024, 'y')));
    assert.equal((await c.get('js:s')).value.toString(), 'mid><', 'a refused value loses nothing else');
    const stats = await new Promise((resolve, reject) =>
      c.stats((err, server, st) => (err ? reject(err) : resolve(st))));
    assert.match(stats.version, /\S+/);
    assert.ok(Number(stats.curr_connections) >= 1);
  } finally {
    c.close();
  }
});

test('SASL: a wrong password is refused', { skip: !addr || !sasl }, async () => {
  const c = client({ password: password + 'x' });
  try {
    await assert.rejects(c.get('js:a'));
  } finally {
    c.close();
  }
});
