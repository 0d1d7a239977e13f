// What the Wireshark drivers share: loading wiregasm (Wireshark as WebAssembly) from the
// package WIREGASM_DIR names, a field's value from its display filter, and a capture opened
// for dissection.
import fs from 'node:fs/promises';
import path from 'node:path';

export async function loadWireshark() {
  const pkg = process.env.WIREGASM_DIR;
  if (!pkg) throw new Error('WIREGASM_DIR is not set');
  const { default: loadWiregasm } = await import(path.join(pkg, 'dist/wiregasm.js'));
  const wg = await loadWiregasm({
    locateFile: (p, prefix) => (p.endsWith('.data') ? path.join(pkg, 'dist/wiregasm.data')
      : p.endsWith('.wasm') ? path.join(pkg, 'dist/wiregasm.wasm') : prefix + p),
    printErr: () => {}, print: () => {}, handleStatus: () => {},
  });
  wg.init();
  return wg;
}

// "kafka.x == v" -> "v" (null for a node with no value)
export const value = (f) => { const i = f.indexOf(' == '); return i < 0 ? null : f.slice(i + 4); };

// The capture at `pcap` as a dissect session; `close()` frees it and its copy in the module.
export async function openCapture(wg, pcap) {
  wg.FS.writeFile('/uploads/cap.pcap', await fs.readFile(pcap));
  const sess = new wg.DissectSession('/uploads/cap.pcap');
  const ld = sess.load();
  if (ld.code !== 0) throw new Error(`wiregasm could not load ${pcap}: ${ld.error}`);
  const close = () => { sess.delete(); wg.FS.unlink('/uploads/cap.pcap'); };
  return { sess, close };
}
