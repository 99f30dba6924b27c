// The contract between a script of lua/ and its TypeScript caller, read from
// the script's header and turned into code on both sides, so that neither
// side positions an argument or a reply field by hand:
//
//   -- ARGV[1] lease_ms (number): text          a scalar argument; its type is
//                                                number, string or flag ('1'/'')
//   -- ARGV[2..] started {id: string, claim: number}: text
//                                                a list of records after the scalars
//   -- ARGV[..] confirmations {id: string, claim: number}: text
//                                                a further list: each list but the
//                                                last goes with its length in front
//   -- ARGV[2..] ids (string[]): text           a list of single values
//   -- REPLY (number): text                     a reply of one value (number, string,
//                                                flag, number[], string[], unknown[],
//                                                or unknown: read by its caller) ...
//   -- REPLY {now: number, stale: number[], paused: flag, marker?: string}: text
//                                                ... or a list read as named fields
//                                                (flag: 1 is true; ?: may be absent)
//
// The Lua side gets a prelude that binds each argument to a local of its name
// (numbers converted, flags compared, each list as <name>_at, its first
// position, and <name>_n, its length); the body then reads no ARGV position
// by hand. The TypeScript side gets, per script, the types of its arguments
// and reply, an encoder and a decoder (scripts/embed-lua.mjs writes them).

const SCALAR = /^-- ARGV\[(\d+)\] (\w+) \((number|string|flag)\):/;
const LIST = /^-- ARGV\[(\d*)\.\.\] (\w+) (?:\{([^}]*)\}|\((number|string)\[\]\)):/;
const ANY_ARGV = /^-- ARGV\[/;
const REPLY = /^-- REPLY (?:\((\w+(?:\[\])?)\)|\{([^}]*)\}):/;
const REPLY_TYPES = new Set(['number', 'string', 'flag', 'number[]', 'string[]', 'unknown[]', 'unknown']);

export const camel = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

function fieldsOf(text, where, types) {
  return text.split(',').map((part) => {
    const m = /^\s*(\w+)(\?)?:\s*([\w[\]]+)\s*$/.exec(part);
    if (!m || !types.has(m[3])) throw new Error(`${where}: '${part.trim()}' is no 'name: type' with a type of ${[...types].join(', ')}`);
    return { name: m[1], optional: m[2] === '?', type: m[3] };
  });
}

/** The arguments and reply a script's header declares; `from` names it in errors. */
export function readContract(source, from) {
  const scalars = [];
  const lists = [];
  let reply;
  for (const line of source.split('\n')) {
    if (ANY_ARGV.test(line)) {
      const scalar = SCALAR.exec(line);
      const list = LIST.exec(line);
      if (scalar) {
        if (lists.length > 0) throw new Error(`${from}: ARGV[${scalar[1]}] ${scalar[2]} comes after a list; scalars go first`);
        if (Number(scalar[1]) !== scalars.length + 1) throw new Error(`${from}: ARGV[${scalar[1]}] where ARGV[${scalars.length + 1}] comes next`);
        scalars.push({ name: scalar[2], type: scalar[3] });
      } else if (list) {
        const at = list[1];
        if (lists.length === 0 && Number(at) !== scalars.length + 1) throw new Error(`${from}: its first list starts at ARGV[${scalars.length + 1}..], not ARGV[${at}..]`);
        if (lists.length > 0 && at !== '') throw new Error(`${from}: a list after the first is declared ARGV[..] (it starts where the one before ends)`);
        const fields = list[3] ? fieldsOf(list[3], `${from}: ARGV ${list[2]}`, new Set(['number', 'string'])) : undefined;
        lists.push({ name: list[2], fields, single: list[4] });
      } else {
        throw new Error(`${from}: '${line}' declares no argument: write '-- ARGV[n] name (number|string|flag): ...' or '-- ARGV[n..] name {field: type, ...}: ...'`);
      }
    }
    const r = REPLY.exec(line);
    if (r) {
      if (reply) throw new Error(`${from}: two REPLY lines`);
      if (r[1] && !REPLY_TYPES.has(r[1])) throw new Error(`${from}: REPLY (${r[1]}) is none of ${[...REPLY_TYPES].join(', ')}`);
      reply = r[1] ? { single: r[1] } : { fields: fieldsOf(r[2], `${from}: REPLY`, REPLY_TYPES) };
    } else if (/^-- (REPLY|Returns?)\b/.test(line)) {
      throw new Error(`${from}: '${line}' is no reply declaration: write '-- REPLY (type): ...' or '-- REPLY {name: type, ...}: ...'`);
    }
  }
  if (!reply) throw new Error(`${from} declares no reply: add '-- REPLY (type): ...' to its header`);
  return { scalars, lists, reply };
}

const width = (list) => (list.fields ? list.fields.length : 1);

/** The Lua lines that bind each argument to a local named as declared. */
export function luaPrelude({ scalars, lists }) {
  const lines = ['-- The arguments by name, as this header declares them (written by scripts/lua-contract.mjs):'];
  if (scalars.length > 0) {
    const value = (s, i) => (s.type === 'number' ? `tonumber(ARGV[${i + 1}])` : s.type === 'flag' ? `ARGV[${i + 1}] == '1'` : `ARGV[${i + 1}]`);
    lines.push(`local ${scalars.map((s) => s.name).join(', ')} = ${scalars.map(value).join(', ')}`);
  }
  let at = String(scalars.length + 1);
  lists.forEach((list, i) => {
    if (i < lists.length - 1) {
      lines.push(`local ${list.name}_n = tonumber(ARGV[${at}])`);
      lines.push(`local ${list.name}_at = ${at} + 1`);
      at = `${list.name}_at + ${width(list)} * ${list.name}_n`;
    } else {
      lines.push(`local ${list.name}_at = ${at}`);
      lines.push(`local ${list.name}_n = ${width(list) === 1 ? `#ARGV - ${list.name}_at + 1` : `math.floor((#ARGV - ${list.name}_at + 1) / ${width(list)})`}`);
    }
  });
  return lines.join('\n');
}

const tsScalar = { number: 'number', string: 'string', flag: 'boolean' };
const tsReply = { number: 'number', string: 'string', flag: 'boolean', 'number[]': 'number[]', 'string[]': 'string[]', 'unknown[]': 'unknown[]', unknown: 'unknown' };

/** The TypeScript type of a script's arguments. */
export function argsType({ scalars, lists }) {
  const parts = scalars.map((s) => `readonly ${camel(s.name)}: ${tsScalar[s.type]}`);
  for (const list of lists) {
    const element = list.fields ? `{ ${list.fields.map((f) => `readonly ${camel(f.name)}: ${f.type}`).join('; ')} }` : list.single;
    parts.push(`readonly ${camel(list.name)}: ReadonlyArray<${element}>`);
  }
  return parts.length === 0 ? 'Record<string, never>' : `{ ${parts.join('; ')} }`;
}

/** The TypeScript type of a script's reply, decoded. */
export function replyType({ reply }) {
  if (reply.single) return tsReply[reply.single];
  return `{ ${reply.fields.map((f) => `readonly ${camel(f.name)}${f.optional ? '?' : ''}: ${tsReply[f.type]}${f.optional ? ' | undefined' : ''}`).join('; ')} }`;
}

/** The body of the encoder: `a` is the arguments object, `v` the list it appends the ARGV to (after the keys), and returns. */
export function encoderSource({ scalars, lists }) {
  const value = (s) => (s.type === 'flag' ? `a.${camel(s.name)} ? '1' : ''` : `a.${camel(s.name)}`);
  const lines = [scalars.length > 0 ? `v.push(${scalars.map(value).join(', ')});` : ''];
  lists.forEach((list, i) => {
    const name = `a.${camel(list.name)}`;
    if (i < lists.length - 1) lines.push(`v.push(${name}.length);`);
    if (list.fields) lines.push(`for (const e of ${name}) v.push(${list.fields.map((f) => `e.${camel(f.name)}`).join(', ')});`);
    else lines.push(`for (const e of ${name}) v.push(e);`);
  });
  lines.push('return v;');
  return lines.join(' ');
}

/** The body of the decoder: `r` is the reply as ioredis gives it. */
export function decoderSource({ reply }, type) {
  const one = (t, x) => (t === 'flag' ? `${x} === 1` : x);
  if (reply.single) return `return ${one(reply.single, 'r')} as ${type};`;
  const fields = reply.fields.map((f, i) => `${camel(f.name)}: ${one(f.type, `t[${i}]`)}`);
  return `const t = r as unknown[]; return { ${fields.join(', ')} } as ${type};`;
}

/** A script body that reads ARGV by a literal position, which only the prelude may do. */
export function positionalReads(body) {
  return body
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('--'))
    .filter((line) => /ARGV\[\s*\d/.test(line) || /#ARGV\s*[=~<>]/.test(line));
}
