// The compression test's kafkajs client: one topic per codec, each fed the plan's records (one
// send per batch of the plan), then read back from the start in one consumer group; writes a
// JSON report shaped like live_compress_workload.py's. gzip is built in; snappy, lz4 and zstd
// come from their plugins, and a plugin that does not load is named in the report's
// codec_errors (its topic is then left out). Every wait is bounded.
// Usage: NODE_PATH=<node_modules> node live_compress_kafkajs.js BOOTSTRAP PLAN.json PREFIX CODECS REPORT.json
'use strict';
const fs = require('fs');
const { Kafka, logLevel, CompressionTypes, CompressionCodecs } = require('kafkajs');

const [BOOT, PLAN, PREFIX, CODECS, OUT] = process.argv.slice(2);
const PARTITIONS = 2;
const TYPES = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
};
const PLUGINS = {
  snappy: () => require('kafkajs-snappy'),
  lz4: () => new (require('kafkajs-lz4'))().codec,
  zstd: () => require('@kafkajs/zstd')(),
};

// the timer is cleared once p settles: a pending one keeps node running until it fires
function withTimeout(p, ms, what) {
  let timer;
  const late = new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`${what}: timeout`)), ms); });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
const b = (h) => (h === null ? null : Buffer.from(h, 'hex'));
const h = (buf) => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('hex'));

// kafkajs takes headers as an object: a repeated key is an array of values, in order. A null
// header value goes as empty: kafkajs 2.2.4 sizes a header with Buffer.byteLength(value)
// before its null check, which throws on null.
function headerObject(pairs) {
  const out = {};
  for (const [k, v] of pairs) {
    const value = b(v) || Buffer.alloc(0);
    if (Object.hasOwn(out, k)) out[k] = [].concat(out[k], [value]);
    else out[k] = value;
  }
  return out;
}

function headerPairs(obj) {
  const out = [];
  for (const k of Object.keys(obj || {})) {
    for (const v of Array.isArray(obj[k]) ? obj[k] : [obj[k]]) out.push([k, h(v)]);
  }
  return out;
}

(async () => {
  const hardStop = setTimeout(() => { console.error('hard timeout'); process.exit(2); }, 60000);
  const plan = JSON.parse(fs.readFileSync(PLAN, 'utf8'));
  const report = {
    client: 'kafkajs',
    versions: { kafkajs: require('kafkajs/package.json').version, node: process.version },
    topics: {},
    codec_errors: {},
  };
  const topics = {};
  for (const codec of CODECS.split(',')) {
    if (PLUGINS[codec]) {
      try {
        CompressionCodecs[TYPES[codec]] = PLUGINS[codec]();
      } catch (e) {
        report.codec_errors[codec] = String(e).slice(0, 500);
        continue;
      }
    }
    topics[`${PREFIX}-${codec}`] = codec;
  }
  const kafka = new Kafka({ clientId: 'kjs-client', brokers: [BOOT], logLevel: logLevel.ERROR,
    connectionTimeout: 5000, requestTimeout: 10000, retry: { retries: 2 } });

  const admin = kafka.admin();
  await withTimeout(admin.connect(), 10000, 'admin connect');
  await withTimeout(admin.createTopics({
    topics: Object.keys(topics).map((topic) => ({ topic, numPartitions: PARTITIONS, replicationFactor: 1 })),
    timeout: 10000,
  }), 15000, 'create topics');
  await admin.disconnect();

  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await withTimeout(producer.connect(), 10000, 'producer connect');
  let want = 0;
  for (const [topic, codec] of Object.entries(topics)) {
    const entry = { codec, sent: [], delivered: [], received: [] };
    report.topics[topic] = entry;
    for (const batch of plan) {
      const messages = batch.map((r) => ({
        partition: r.partition, key: b(r.key), value: b(r.value),
        headers: headerObject(r.headers), timestamp: String(r.timestamp),
      }));
      for (const m of messages) {
        entry.sent.push({ partition: m.partition, key: h(m.key), value: h(m.value),
          headers: headerPairs(m.headers), timestamp: Number(m.timestamp) });
      }
      try {
        const meta = await withTimeout(producer.send({ topic, acks: -1, compression: TYPES[codec], messages }), 15000, 'send');
        // a batch per partition: its records take the offsets from the broker's base offset on
        const next = {};
        for (const md of meta) next[md.partition] = Number(md.baseOffset);
        for (const m of messages) {
          entry.delivered.push({ error: null, partition: m.partition, offset: next[m.partition]++ });
        }
      } catch (e) {
        for (const m of messages) entry.delivered.push({ error: String(e).slice(0, 300), partition: m.partition });
      }
      want += messages.length;
    }
  }
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: 'kjs-reader', sessionTimeout: 6000, heartbeatInterval: 1000,
    rebalanceTimeout: 5000, maxWaitTimeInMs: 500 });
  await withTimeout(consumer.connect(), 10000, 'consumer connect');
  await withTimeout(consumer.subscribe({ topics: Object.keys(topics), fromBeginning: true }), 10000, 'subscribe');
  let got = 0;
  const done = new Promise((resolve) => {
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message: m }) => {
        report.topics[topic].received.push({ offset: Number(m.offset), partition, key: h(m.key), value: h(m.value),
          headers: headerPairs(m.headers), timestamp: Number(m.timestamp) });
        got += 1;
        if (got >= want) resolve();
      },
    });
  });
  await withTimeout(done, 40000, 'consume').catch((e) => { report.errors = [String(e)]; });
  await withTimeout(consumer.disconnect(), 10000, 'consumer disconnect').catch(() => {});
  fs.writeFileSync(OUT, JSON.stringify(report));
  clearTimeout(hardStop);
  process.exit(0); // whatever kafkajs still holds open
})().catch((e) => { console.error(e); process.exit(1); });
