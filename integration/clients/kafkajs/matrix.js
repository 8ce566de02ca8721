// The kafkajs column of the client matrix (integration/clientmatrix_test.go):
// runs one phase of admin operations with kafkajs's admin client against
// the cluster its only argument (a JSON run) names, checks what each
// returns, and prints one JSON line per operation: {"op": ..., "err": ""}
// when it checked out. kafkajs offers no incremental AlterConfigs, no
// elections, no SCRAM user admin, no cancel of a reassignment (its replicas
// must be a list) and no cluster-default configs (a resource name must not
// be empty): the test knows.
'use strict'

const {
  Kafka,
  logLevel,
  ConfigResourceTypes,
  ConfigSource,
  AclResourceTypes,
  AclOperationTypes,
  AclPermissionTypes,
  ResourcePatternTypes,
} = require('kafkajs')
const fs = require('fs')

const run = JSON.parse(process.argv[2])

function report(op, err) {
  process.stdout.write(JSON.stringify({ op, err: err ? String(err.message || err) : '' }) + '\n')
}

async function step(op, f) {
  try {
    await f()
    report(op, null)
  } catch (e) {
    report(op, e)
  }
}

function newAdmin(mechanism, password) {
  return newKafka(mechanism, password).admin()
}

function newKafka(mechanism, password) {
  const cfg = {
    clientId: 'ctrlquorum-matrix-kafkajs',
    brokers: [run.bootstrap],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 10000,
    requestTimeout: 20000,
    retry: run.phase === 'login' ? { retries: 0 } : { retries: 5, initialRetryTime: 200 },
  }
  if (run.tls_ca) {
    cfg.ssl = {
      ca: [fs.readFileSync(run.tls_ca, 'utf8')],
      cert: fs.readFileSync(run.tls_cert, 'utf8'),
      key: fs.readFileSync(run.tls_key, 'utf8'),
    }
  }
  if (mechanism) {
    cfg.sasl = { mechanism: mechanism.toLowerCase(), username: run.user, password }
  }
  return new Kafka(cfg)
}

function sorted(xs) {
  return [...xs].sort((a, b) => a - b)
}

function same(a, b) {
  return JSON.stringify(sorted(a)) === JSON.stringify(sorted(b))
}

function fail(msg) {
  throw new Error(msg)
}

function checkPartitions(t, n, rf) {
  if (t.partitions.length !== n) fail(`${t.name} has ${t.partitions.length} partitions, want ${n}`)
  for (const p of t.partitions) {
    if (p.partitionErrorCode) fail(`${t.name}-${p.partitionId}: error ${p.partitionErrorCode}`)
    if (p.replicas.length !== rf || !p.replicas.includes(p.leader) || p.isr.length !== rf)
      fail(`${t.name}-${p.partitionId}: replicas ${p.replicas}, leader ${p.leader}, ISR ${p.isr}`)
    for (const r of p.replicas) if (!run.brokers.includes(r)) fail(`${t.name}-${p.partitionId}: replica ${r} is not a broker`)
  }
}

async function describeConfigs(admin, type, name) {
  const res = await admin.describeConfigs({ resources: [{ type, name }], includeSynonyms: false })
  if (res.resources.length !== 1) fail(`${res.resources.length} resources described`)
  const r = res.resources[0]
  if (r.errorCode) fail(`error ${r.errorCode}: ${r.errorMessage}`)
  const m = new Map()
  for (const e of r.configEntries) m.set(e.configName, e)
  return m
}

function sourceName(s) {
  return Object.keys(ConfigSource).find(k => ConfigSource[k] === s) || String(s)
}

function wantConfig(m, key, value, source) {
  const c = m.get(key)
  if (!c) fail(`no ${key} among ${m.size} configs`)
  if (c.configValue !== value || c.configSource !== source)
    fail(`${key} = ${c.configValue} (${sourceName(c.configSource)}), want ${value} (${sourceName(source)})`)
}

function notSource(m, key, source) {
  const c = m.get(key)
  if (c && c.configSource === source) fail(`${key} is still ${sourceName(source)} (${c.configValue})`)
}

function reassignTarget(replicas) {
  const t = run.brokers.filter(b => !replicas.includes(b))
  for (const b of replicas) {
    if (t.length >= replicas.length) break
    t.push(b)
  }
  return t.slice(0, replicas.length)
}

async function topics(admin) {
  const a = run.prefix + '-a'
  const b = run.prefix + '-b'
  await step('describe cluster', async () => {
    const c = await admin.describeCluster()
    const ids = sorted(c.brokers.map(x => x.nodeId))
    if (!same(ids, run.brokers)) fail(`nodes ${ids}, want the brokers ${run.brokers} only`)
    if (!c.clusterId) fail('no cluster id')
    if (!run.brokers.includes(c.controller)) fail(`controller ${c.controller} is not a broker`)
  })
  await step('create topics', async () => {
    // kafkajs answers false for a topic that exists: one its retry after
    // a lost answer finds created. The operations after this one check it.
    await admin.createTopics({
      topics: [
        { topic: a, numPartitions: 3, replicationFactor: 3, configEntries: [{ name: 'retention.ms', value: '3600000' }] },
        { topic: b, numPartitions: 1, replicationFactor: 2 },
      ],
      waitForLeaders: true,
    })
  })
  await step('list topics', async () => {
    const l = await admin.listTopics()
    if (!l.includes(a) || !l.includes(b)) fail(`lists ${l.length} topics, without ${a} or ${b}`)
  })
  const describe = async n => {
    const md = await admin.fetchTopicMetadata({ topics: [a] })
    if (md.topics.length !== 1 || md.topics[0].name !== a) fail(`describes ${md.topics.length} topics`)
    checkPartitions(md.topics[0], n, 3)
  }
  await step('describe topics', () => describe(3))
  await step('add partitions', async () => {
    await admin.createPartitions({ topicPartitions: [{ topic: a, count: 5 }] })
    await describe(5)
  })
  await step('describe topic configs', async () => {
    const m = await describeConfigs(admin, ConfigResourceTypes.TOPIC, a)
    wantConfig(m, 'retention.ms', '3600000', ConfigSource.TOPIC_CONFIG)
    wantConfig(m, 'cleanup.policy', 'delete', ConfigSource.DEFAULT_CONFIG)
  })
  await step('alter topic configs (legacy)', async () => {
    await admin.alterConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: a, configEntries: [{ name: 'segment.bytes', value: '1048576' }] }],
    })
    const m = await describeConfigs(admin, ConfigResourceTypes.TOPIC, a)
    wantConfig(m, 'segment.bytes', '1048576', ConfigSource.TOPIC_CONFIG)
    // A legacy AlterConfigs replaces the whole set.
    notSource(m, 'retention.ms', ConfigSource.TOPIC_CONFIG)
  })
  await step('start reassignment', async () => {
    const md = await admin.fetchTopicMetadata({ topics: [b] })
    const target = reassignTarget(md.topics[0].partitions[0].replicas)
    await admin.alterPartitionReassignments({ topics: [{ topic: b, partitionAssignment: [{ partition: 0, replicas: target }] }] })
    const deadline = Date.now() + 30000
    for (;;) {
      const now = await admin.fetchTopicMetadata({ topics: [b] })
      const got = now.topics[0].partitions[0].replicas
      if (same(got, target)) return
      if (Date.now() > deadline) fail(`replicas ${got}, want ${target} after the reassignment`)
      await new Promise(r => setTimeout(r, 100))
    }
  })
  await step('list reassignments', async () => {
    const res = await admin.listPartitionReassignments({ topics: [{ topic: b, partitions: [0] }] })
    for (const t of res.topics || []) {
      for (const p of t.partitions) {
        if ((p.addingReplicas || []).length || (p.removingReplicas || []).length)
          fail(`lists a finished reassignment: ${JSON.stringify(p)}`)
      }
    }
  })
  await step('produce', async () => {
    const producer = newKafka().producer()
    await producer.connect()
    try {
      const res = await producer.send({ topic: a, acks: -1, messages: [{ partition: 0, value: run.prefix }] })
      if (res.length !== 1 || res[0].partition !== 0 || res[0].baseOffset !== '0')
        fail(`produced ${JSON.stringify(res)}, want offset 0 of partition 0`)
    } finally {
      await producer.disconnect()
    }
  })
  await step('consume', async () => {
    // kafkajs consumes in a consumer group only.
    const consumer = newKafka().consumer({ groupId: run.prefix, retry: { retries: 2 } })
    try {
      const got = await Promise.race([
        (async () => {
          await consumer.connect()
          await consumer.subscribe({ topics: [a], fromBeginning: true })
          return await new Promise((resolve, reject) => {
            consumer.run({ eachMessage: async ({ partition, message }) => {
              if (partition === 0) resolve(message)
            } }).catch(reject)
          })
        })(),
        new Promise((_, reject) => setTimeout(() => reject(new Error('no record in 30s')), 30000)),
      ])
      if (got.value.toString() !== run.prefix || got.offset !== '0')
        fail(`first record ${got.value} at offset ${got.offset}, want ${run.prefix} at 0`)
    } finally {
      await consumer.disconnect()
    }
  })
  await step('delete topics', async () => {
    await admin.deleteTopics({ topics: [a, b] })
    const l = await admin.listTopics()
    if (l.includes(a) || l.includes(b)) fail(`still listed right after the delete: ${l.filter(x => x === a || x === b)}`)
  })
}

async function security(admin) {
  const a = run.prefix + '-a'
  const principal = 'User:' + run.prefix
  const filter = {
    resourceType: AclResourceTypes.TOPIC,
    resourceName: a,
    resourcePatternType: ResourcePatternTypes.LITERAL,
    principal,
    host: '*',
    operation: AclOperationTypes.ANY,
    permissionType: AclPermissionTypes.ANY,
  }
  await step('create ACLs', async () => {
    await admin.createAcls({
      acl: [
        {
          resourceType: AclResourceTypes.TOPIC,
          resourceName: a,
          resourcePatternType: ResourcePatternTypes.LITERAL,
          principal,
          host: '*',
          operation: AclOperationTypes.READ,
          permissionType: AclPermissionTypes.ALLOW,
        },
      ],
    })
  })
  const count = async () => {
    const res = await admin.describeAcls(filter)
    let n = 0
    for (const r of res.resources) {
      for (const acl of r.acls) {
        if (r.resourceName !== a || acl.principal !== principal || acl.operation !== AclOperationTypes.READ || acl.host !== '*')
          fail(`describes ${JSON.stringify(r)}`)
        n++
      }
    }
    return n
  }
  await step('describe ACLs', async () => {
    const n = await count()
    if (n !== 1) fail(`describes ${n} ACLs, want 1`)
  })
  await step('delete ACLs', async () => {
    const res = await admin.deleteAcls({ filters: [filter] })
    const fr = res.filterResponses[0]
    if (fr.errorCode) fail(`error ${fr.errorCode}: ${fr.errorMessage}`)
    if (fr.matchingAcls.length !== 1) fail(`deleted ${fr.matchingAcls.length} ACLs, want 1`)
    const n = await count()
    if (n !== 0) fail(`${n} ACLs left after the delete`)
  })
}

async function cluster(admin) {
  const key = run.config_key
  const broker = String(run.brokers[0])
  await step('describe broker configs', async () => {
    const m = await describeConfigs(admin, ConfigResourceTypes.BROKER, broker)
    for (const k of [key, 'min.insync.replicas', 'unclean.leader.election.enable', 'auto.leader.rebalance.enable'])
      if (!m.has(k)) fail(`no ${k} among the ${m.size} configs of broker ${broker}`)
  })
  await step('alter broker configs (legacy)', async () => {
    const value = '3600021'
    await admin.alterConfigs({ resources: [{ type: ConfigResourceTypes.BROKER, name: broker, configEntries: [{ name: key, value }] }] })
    let m = await describeConfigs(admin, ConfigResourceTypes.BROKER, broker)
    wantConfig(m, key, value, ConfigSource.DYNAMIC_BROKER_CONFIG)
    await admin.alterConfigs({ resources: [{ type: ConfigResourceTypes.BROKER, name: broker, configEntries: [] }] })
    m = await describeConfigs(admin, ConfigResourceTypes.BROKER, broker)
    notSource(m, key, ConfigSource.DYNAMIC_BROKER_CONFIG)
  })
}

function loginOp(mech) {
  return mech === 'PLAIN' ? 'login PLAIN over TLS' : 'login ' + mech
}

function wrongPasswordOp(mech) {
  return mech === 'PLAIN' ? 'wrong password refused (PLAIN over TLS)' : `wrong password refused (${mech})`
}

async function login() {
  for (const mech of run.mechanisms) {
    await step(loginOp(mech), async () => {
      const admin = newAdmin(mech, run.password)
      try {
        await admin.connect()
        const l = await admin.listTopics()
        if (!l.includes(run.login_topic)) fail(`lists ${l.length} topics, not ${run.login_topic}`)
      } finally {
        await admin.disconnect()
      }
    })
    await step(wrongPasswordOp(mech), async () => {
      const admin = newAdmin(mech, run.password + '-wrong')
      let err = null
      try {
        await admin.connect()
        await admin.listTopics()
      } catch (e) {
        err = e
      } finally {
        await admin.disconnect()
      }
      if (!err || err.name !== 'KafkaJSSASLAuthenticationError')
        fail(`got ${err ? err.name + ': ' + err.message : 'no error'}, want KafkaJSSASLAuthenticationError`)
    })
  }
}

// noLogin checks what a client that does not log in gets from a SASL
// cluster (the run of its SCRAM mechanisms): an error, or at least no
// login topic, from listTopics, and an error from createTopics.
async function noLogin() {
  if (!run.mechanisms.includes('SCRAM-SHA-512')) return
  await step('no login, nothing seen or done', async () => {
    const admin = newAdmin(null, null)
    try {
      await admin.connect()
    } catch (e) {
      return // refused at once
    }
    try {
      let listed = []
      try {
        listed = await admin.listTopics()
      } catch (e) {
        listed = []
      }
      if (listed.includes(run.login_topic)) fail(`lists ${run.login_topic} without a login`)
      let created = true
      try {
        await admin.createTopics({ topics: [{ topic: run.prefix + '-no-login', numPartitions: 1, replicationFactor: 1 }] })
      } catch (e) {
        created = false
      }
      if (created) fail('created a topic without a login')
    } finally {
      await admin.disconnect()
    }
  })
}

async function main() {
  if (run.phase === 'login') {
    await login()
    return noLogin()
  }
  const admin = newAdmin((run.mechanisms || [])[0], run.password)
  await admin.connect()
  try {
    if (run.phase === 'topics') await topics(admin)
    else if (run.phase === 'security') await security(admin)
    else if (run.phase === 'cluster') await cluster(admin)
    else fail('no phase ' + run.phase)
  } finally {
    await admin.disconnect()
  }
}

main().catch(e => {
  process.stderr.write((e && e.name ? e.name + ': ' + e.message : String(e)) + '\n')
  process.exit(1)
})
