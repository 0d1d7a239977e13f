// What Wireshark (wiregasm, WebAssembly) makes of a live capture on a broker port other than
// 9092: one line per Kafka PDU, with the fields the mid-stream test compares, not whole trees
// (read from the packet list's columns where a frame holds one PDU, else from its tree).
//   WIREGASM_DIR=.../package node wireshark_mid_stream.mjs IN.pcap PORT OUT.json
// OUT.json: {"wireshark": version, "port": PORT, "pdus": [[frame, src port, dst port, api key,
// api version, correlation id, request missing, [record keys]], ...], "malformed": [[frame,
// label], ...]}. A response's api key and version are the ones Wireshark took from its request
// (null when it saw none: "request missing"); record keys are latin1 strings, in wire order.
import fs from 'node:fs/promises';
import { loadWireshark, openCapture, value } from './wiregasm.mjs';

const [pcap, port, outPath] = process.argv.slice(2);
if (!outPath) throw new Error('usage: wireshark_mid_stream.mjs IN.pcap PORT OUT.json');
const wg = await loadWireshark();

// the Kafka dissector listens on 9092 only, unless told otherwise; and the packet list's
// columns are the header fields wanted: reading them is cheap, reading a frame's tree is not
const COLUMNS = ['tcp.srcport', 'tcp.dstport', 'kafka.api_key', 'kafka.api_version', 'kafka.response.version',
  'kafka.correlation_id', 'kafka.request_missing'];
const prefs = [['kafka', 'tcp.port', String(port)],
  ['gui', 'column.format', COLUMNS.map((c, i) => `"c${i}","%Cus:${c}:0:U"`).join(',')]];
for (const [module, key, v] of prefs) {
  const set = wg.setPref(module, key, v);
  if (set.code !== 0) throw new Error(`${module}.${key}: ${set.error}`);
}
wg.applyPreferences();

const num = (f) => { const v = value(f); return v === null ? null : Number(v); };
const hexText = (v) => Buffer.from(v.replaceAll(':', ''), 'hex').toString('latin1');

const { sess, close } = await openCapture(wg, pcap);
const pdus = [];
const malformed = [];
const frames = sess.getFrames('kafka', 0, 0);
const orNull = (v) => (v === '' ? null : Number(v));
for (let i = 0; i < frames.frames.size(); i++) {
  const meta = frames.frames.get(i);
  const number = meta.number;
  const c = [...Array(meta.columns.size()).keys()].map((j) => meta.columns.get(j));
  meta.columns.delete();
  // one PDU in the frame, and not a Produce request (whose record keys are in the tree)
  if (!c[5].includes(',') && !(c[2] === '0' && Number(c[1]) === Number(port))) {
    pdus.push([number, Number(c[0]), Number(c[1]), orNull(c[2]), orNull(c[3] || c[4]), orNull(c[5]), c[6] !== '', []]);
    continue;
  }
  const f = sess.getFrame(number);
  let src = null;
  let dst = null;
  // Reading a node copies its whole subtree out of the module: only the nodes needed are read
  // (the header fields are the Kafka node's children; record keys only in Produce requests).
  const keys = (nodes, out) => {
    for (let j = 0; j < nodes.size(); j++) {
      const n = nodes.get(j);
      const filt = n.filter || '';
      if (filt.startsWith('kafka.message_key')) out.push(value(filt) === null ? null : hexText(value(filt)));
      else keys(n.tree, out);
      n.tree.delete();
    }
  };
  const kafka = (nodes) => {
    const pdu = [number, src, dst, null, null, null, false, []];
    for (let j = 0; j < nodes.size(); j++) {
      const n = nodes.get(j);
      const filt = n.filter || '';
      const name = filt.split(' == ')[0];
      if (name === 'kafka.api_key') pdu[3] = num(filt);
      else if (name === 'kafka.api_version' || name === 'kafka.response.version') pdu[4] = num(filt);
      else if (name === 'kafka.correlation_id') pdu[5] = num(filt);
      else if (name === '_ws.expert') {
        for (let k = 0; k < n.tree.size(); k++) {
          const e = n.tree.get(k);
          if (e.filter === 'kafka.request_missing') pdu[6] = true;
          e.tree.delete();
        }
      } else if (pdu[3] === 0 && dst === Number(port)) keys(n.tree, pdu[7]);
      n.tree.delete();
    }
    return pdu;
  };
  const top = f.tree;
  for (let j = 0; j < top.size(); j++) {
    const n = top.get(j);
    const filt = n.filter || '';
    if (filt === 'tcp') {
      for (let k = 0; k < n.tree.size(); k++) {
        const t = n.tree.get(k);
        if (t.filter.startsWith('tcp.srcport ==')) src = num(t.filter);
        else if (t.filter.startsWith('tcp.dstport ==')) dst = num(t.filter);
        t.tree.delete();
      }
    } else if (filt === 'kafka') pdus.push(kafka(n.tree));
    else if (filt.startsWith('_ws.malformed')) malformed.push([number, n.label]);
    n.tree.delete();
  }
  top.delete();
  f.follow.delete();
}
frames.frames.delete();
close();
await fs.writeFile(outPath, JSON.stringify({ wireshark: wg.wiresharkVersion(), port: Number(port), pdus, malformed }));
