import { connect } from 'node:net';

const PING = '*1\r\n$4\r\nPING\r\n';
const PONG_BYTES = '+PONG\r\n'.length;

/**
 * Microseconds per awaited PING over a plain socket, no client library: the
 * least one round trip to this Redis can cost from this process right now.
 * A row whose every operation needs a round trip (an awaited enqueue must be
 * confirmed by Redis; at parallelism 1 the next event can only be claimed once
 * the handler's slot is free) cannot take less per operation than this, with
 * any client and any script. Measured next to each library's run, because on
 * a VM it moves with where the scheduler puts the two processes.
 */
export async function roundTripFloorMicros(port: number, count = 2_000): Promise<number> {
  const socket = connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    let awaited = 0;
    let onPong: (() => void) | undefined;
    socket.on('data', (chunk: Buffer) => {
      // A reply may arrive split; count bytes until the whole +PONG is in.
      awaited -= chunk.length;
      if (awaited <= 0 && onPong) {
        const done = onPong;
        onPong = undefined;
        done();
      }
    });
    const ping = () =>
      new Promise<void>((resolve) => {
        awaited = PONG_BYTES;
        onPong = resolve;
        socket.write(PING);
      });
    for (let i = 0; i < count / 10; i++) await ping();
    const started = performance.now();
    for (let i = 0; i < count; i++) await ping();
    return ((performance.now() - started) * 1_000) / count;
  } finally {
    socket.destroy();
  }
}
