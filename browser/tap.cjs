'use strict';
// The driver tap: loaded into Playwright's driver (Node) by NODE_OPTIONS's
// --require (browser/flags.py), it gives the worker a second way onto
// Chromium's debugging pipe, for the CDP clients' messages (cdp/mux.py),
// that skips Playwright's own protocol.
//
// Chromium has one pipe (fds 3 and 4, `--remote-debugging-pipe`: messages of
// JSON ended by a NUL byte) and the driver holds it. When the driver spawns
// Chromium, this wraps the child's read end: every message Chromium sends is
// looked at once, and those of the worker's own sessions go to the worker,
// the rest to Playwright as they came. The worker's messages are written to
// the pipe whole, between Playwright's (which writes each message and its NUL
// in one turn of the event loop).
//
// Which messages are the worker's:
// - an answer at the browser's root whose id is negative (Playwright's only
//   negative id is -9999, its Browser.close, which it ignores the answer of):
//   the worker's Target.attachToBrowserTarget, which names its session;
// - everything of a session the worker attached: Chromium ends a flat
//   session's message with `"sessionId":"<id>"}`, read from the tail without
//   parsing the rest. A session attached on one of the worker's sessions
//   (Target.attachedToTarget) is the worker's too, until it detaches.
//
// What the tap holds is bounded: while Chromium's pipe does not take the
// worker's messages, the tap stops reading the worker (whose own writes then
// wait, browser/tap.py); while the worker has not taken HOLD bytes of
// Chromium's, the tap stops reading Chromium, Playwright's messages with them
// (the worker's event loop reads both).
//
// The worker is reached on the Unix socket PENELOPE_CDP_TAP names. The
// worker accepts it only from its own child (it reads the peer's
// credentials): no other process reaches the pipe, and no port is opened.
// core/seams/__init__.py, piece 18, says what of Playwright's this relies on.

const childProcess = require('child_process');
const net = require('net');
const { EventEmitter } = require('events');

const socketPath = process.env.PENELOPE_CDP_TAP;
// Chromium (spawned with this process's environment) needs neither.
delete process.env.PENELOPE_CDP_TAP;
if (process.env.NODE_OPTIONS)
  process.env.NODE_OPTIONS = process.env.NODE_OPTIONS.split(`--require "${__filename}"`).join('').trim();

const NUL = 0;
const SESSION_TAIL = Buffer.from('"sessionId":"');
const PLAYWRIGHT_CLOSE = '{"id":-9999,';
const HOLD = 8 * 1024 * 1024;  // bytes of Chromium's messages waiting for the worker before the tap stops reading Chromium

if (socketPath) {
  const spawn = childProcess.spawn;
  childProcess.spawn = function tappedSpawn(command, args) {
    const child = spawn.apply(this, arguments);
    if (Array.isArray(args) && args.includes('--remote-debugging-pipe') && child.stdio && child.stdio[3] && child.stdio[4])
      tap(child);
    return child;
  };
}

function tap(child) {
  const toBrowser = child.stdio[3];
  const fromBrowser = child.stdio[4];
  // What Playwright reads in place of the pipe: the events it listens to.
  // Playwright listens once Chromium is up; what comes before is held for it,
  // as the paused pipe held it.
  const view = new EventEmitter();
  Object.defineProperty(view, 'readable', { get: () => fromBrowser.readable });
  const held = [];
  view.on('newListener', (event) => {
    if (event === 'data' && held.length) setImmediate(() => { for (const chunk of held.splice(0)) view.emit('data', chunk); });
  });
  const toPlaywright = (chunk) => {
    if (view.listenerCount('data') && !held.length) view.emit('data', chunk);
    else held.push(chunk);
  };
  child.stdio[4] = view;

  const ours = new Set();
  let browserPaused = false;  // Chromium is not read while the worker has HOLD bytes to take
  let pending = [];  // the start of a message from Chromium not yet ended
  let unsent = [];  // the start of a message from the worker not yet ended
  const worker = net.createConnection(socketPath);
  worker.on('error', () => worker.destroy());
  // A worker that goes while Chromium is paused for it must not leave Playwright's messages paused too.
  worker.on('close', () => { if (browserPaused) { browserPaused = false; fromBrowser.resume(); } });

  const sessionOf = (buffer, start, end) => {
    if (end - start < SESSION_TAIL.length + 4 || buffer[end - 1] !== 125 || buffer[end - 2] !== 34) return null;
    const open = buffer.lastIndexOf(34, end - 3);
    const at = open - SESSION_TAIL.length + 1;
    if (at < start || buffer.compare(SESSION_TAIL, 0, SESSION_TAIL.length, at, open + 1) !== 0) return null;
    return buffer.toString('latin1', open + 1, end - 2);
  };
  const isOurs = (buffer, start, end) => {
    if (buffer[start + 6] === 45 /* '-' of {"id":- */ && buffer.toString('latin1', start, start + 7) === '{"id":-')
      return buffer.toString('latin1', start, start + PLAYWRIGHT_CLOSE.length) !== PLAYWRIGHT_CLOSE;
    const session = sessionOf(buffer, start, end);
    return session !== null && ours.has(session);
  };
  const learn = (text) => {
    if (text.startsWith('{"method":"Target.attachedToTarget"')) ours.add(JSON.parse(text).params.sessionId);
    else if (text.startsWith('{"method":"Target.detachedFromTarget"')) ours.delete(JSON.parse(text).params.sessionId);
    else if (text.startsWith('{"id":-')) {
      const answer = JSON.parse(text);
      if (answer.result && answer.result.sessionId) ours.add(answer.result.sessionId);
    }
  };
  const toWorker = (buffer, start, end) => {
    const text = buffer.toString('utf8', start, end);
    learn(text);
    if (worker.destroyed) return;
    worker.write(text + '\0');
    if (worker.writableLength > HOLD && !browserPaused) {
      browserPaused = true;
      fromBrowser.pause();
      worker.once('drain', () => { browserPaused = false; fromBrowser.resume(); });
    }
  };

  fromBrowser.on('data', (chunk) => {
    let end = chunk.indexOf(NUL);
    if (end === -1) {
      pending.push(chunk);
      return;
    }
    const kept = [];
    let start = 0;
    let keptFrom = 0;
    if (pending.length) {
      pending.push(chunk.subarray(0, end));
      const first = Buffer.concat(pending);
      pending = [];
      if (isOurs(first, 0, first.length)) toWorker(first, 0, first.length);
      else kept.push(first, chunk.subarray(end, end + 1));
      start = keptFrom = end + 1;
      end = chunk.indexOf(NUL, start);
    }
    while (end !== -1) {
      if (isOurs(chunk, start, end)) {
        if (keptFrom < start) kept.push(chunk.subarray(keptFrom, start));
        toWorker(chunk, start, end);
        keptFrom = end + 1;
      }
      start = end + 1;
      end = chunk.indexOf(NUL, start);
    }
    if (keptFrom < start) kept.push(chunk.subarray(keptFrom, start));
    if (start < chunk.length) pending.push(chunk.subarray(start));
    if (kept.length) toPlaywright(kept.length === 1 ? kept[0] : Buffer.concat(kept));
  });
  fromBrowser.on('close', () => {
    worker.end();
    view.emit('close');
  });
  fromBrowser.on('error', (error) => {
    if (view.listenerCount('error')) view.emit('error', error);
  });

  let workerPaused = false;
  worker.on('data', (chunk) => {
    const last = chunk.lastIndexOf(NUL);
    if (last === -1) {
      unsent.push(chunk);
      return;
    }
    unsent.push(chunk.subarray(0, last + 1));
    if (toBrowser.writable && !toBrowser.write(unsent.length === 1 ? unsent[0] : Buffer.concat(unsent)) && !workerPaused) {
      workerPaused = true;
      worker.pause();
      toBrowser.once('drain', () => { workerPaused = false; worker.resume(); });
    }
    unsent = last + 1 < chunk.length ? [chunk.subarray(last + 1)] : [];
  });
}
