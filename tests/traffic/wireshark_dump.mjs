// Dump every Kafka PDU that Wireshark (wiregasm, WebAssembly) dissects, as its protocol tree.
//   WIREGASM_DIR=.../package node wireshark_dump.mjs IN.pcap OUT.json [IN.pcap OUT.json ...]
// OUT.json: {"wireshark": version, "pdus": [{frame, src, dst, kafka: [tree]}, ...], "malformed": [...]}
// A tree node is [filter, label, children]; the filter "kafka.x == v" carries name and value.
// One process for all captures: loading the 70 MB module costs more than dissecting.
import fs from 'node:fs/promises';
import { loadWireshark, openCapture, value } from './wiregasm.mjs';

const wg = await loadWireshark();

const tree = (nodes) => {
  const out = [];
  for (let i = 0; i < nodes.size(); i++) {
    const n = nodes.get(i);
    out.push([n.filter || '', n.label, tree(n.tree)]);
  }
  return out;
};

async function dump(pcap, outPath) {
  const { sess, close } = await openCapture(wg, pcap);
  const pdus = [];
  const malformed = [];
  const frames = sess.getFrames('kafka', 0, 0);
  for (let i = 0; i < frames.frames.size(); i++) {
    const num = frames.frames.get(i).number;
    const f = sess.getFrame(num);
    const addr = {};
    // Walk the layers: TCP ports first, then each Kafka PDU (several may end in one frame).
    const walk = (nodes) => {
      for (let j = 0; j < nodes.size(); j++) {
        const n = nodes.get(j);
        const name = (n.filter || '').split(' == ')[0];
        if (name === 'ip.src' || name === 'ipv6.src') addr.srcip = value(n.filter);
        else if (name === 'ip.dst' || name === 'ipv6.dst') addr.dstip = value(n.filter);
        else if (name === 'tcp.srcport') addr.src = Number(value(n.filter));
        else if (name === 'tcp.dstport') addr.dst = Number(value(n.filter));
        if (n.filter === 'kafka') pdus.push({ frame: num, ...addr, label: n.label, kafka: tree(n.tree) });
        else if (name === '_ws.malformed') malformed.push({ frame: num, ...addr, label: n.label });
        else walk(n.tree);
      }
    };
    walk(f.tree);
    f.delete?.();
  }
  close();
  await fs.writeFile(outPath, JSON.stringify({ wireshark: wg.wiresharkVersion(), pdus, malformed }));
}

const args = process.argv.slice(2);
if (args.length === 0 || args.length % 2) throw new Error('usage: wireshark_dump.mjs IN OUT [IN OUT ...]');
for (let i = 0; i < args.length; i += 2) await dump(args[i], args[i + 1]);
