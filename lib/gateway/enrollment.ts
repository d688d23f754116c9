// Enrollment: an agent's first credential, a new one for an agent that proves its current
// one, and the re-enrollments held for an Administrator's decision.
import crypto from 'node:crypto'
import { AGENT_PREFIX, unauthenticated } from '../auth.js'
import { problem } from '../errors.js'
import { newSecret, sha256 } from '../passwords.js'
import type { Context } from '../platform/context.js'
import { iso } from '../time.js'
import { agentAsset, maskMachineId } from '../agents/views.js'
import { hostEvent } from './events.js'
import { type GatewayState, type Schemas, seatFree } from './state.js'
function secretMatches(s: GatewayState, given: string): boolean {
  // Comparing digests: equal lengths, and the time taken says nothing about the secret.
  return crypto.timingSafeEqual(crypto.createHash('sha256').update(given).digest(), crypto.createHash('sha256').update(s.config.enrollmentSecret).digest())
}

/** A new credential: its agent starts afresh (no interval to wait, no check-in time held). */
function forget(s: GatewayState, agentId: number) {
  s.limits.forgetCheckIn(agentId)
  s.heartbeats.delete(agentId)
}

export async function enroll(s: GatewayState, ctx: Context, body: Schemas['GatewayEnrollRequest']): Promise<Schemas['GatewayEnrollResponse']> {
  const now = Date.now()
  if (!secretMatches(s, body.enrollmentSecret)) {
    await s.audit.record(ctx, {
      description: `Enrollment of "${body.hostIdentifier}" refused: wrong enrollment secret`,
      details: { machineId: maskMachineId(body.machineId), hostIdentifier: body.hostIdentifier },
      outcome: 'Refused',
      user: null,
      asset: { name: body.hostIdentifier, type: 'Agent' },
      refusal: { status: 401, reason: 'wrong enrollment secret' },
    })
    throw unauthenticated('The enrollment secret is wrong.')
  }
  const credential = newSecret(AGENT_PREFIX)
  const hash = sha256(credential)
  return s.uow.run(async () => {
    // Held: of two enrollments of one machine at once, the second finds the first's agent
    // (and its credential) as if it came later, instead of inserting the machine again.
    const known = await s.store.byMachineId(body.machineId, true)
    let id: number, uuid: string
    if (known) {
      // The shared secret alone never moves an enrolled identity: the agent proves its
      // current credential, or an Administrator approves the new enrollment.
      if (!provesCredential(body.currentCredential, known.credential_hash)) return hold(s, ctx, known, body, hash, credential, now)
      ;({ id, uuid } = known)
      await s.store.rotateCredential(id, hash, body.hostIdentifier)
      forget(s, id)
    } else {
      uuid = crypto.randomUUID().toLowerCase()
      const expiration = s.license.expirationDate === null ? null : Date.parse(s.license.expirationDate)
      id = await s.store.insertAgent({
        uuid,
        machineId: body.machineId,
        credentialHash: hash,
        enrolledMs: now,
        hostIdentifier: body.hostIdentifier,
        licenseStatus: expiration !== null && expiration <= now ? 'Expired' : (await seatFree(s)) ? 'Activated' : 'Pending',
        expirationMs: expiration,
        licenseAccountName: s.license.accountName,
        checkInSeconds: s.config.checkInSeconds,
      })
    }
    const agent = (await s.store.agent(id))!
    const what = known ? 'enrolled again with its current credential; the previous credential no longer works' : `enrolled (license ${agent.license_status})`
    // Named `HOST (address)` as its later events will be (the address a check-in would
    // report: the one sent, else the caller's), so that a host is one source.
    const named = { ...agent, local_ip_address: agent.local_ip_address ?? body.localIpAddress ?? ctx.sourceAddress ?? null }
    await s.events.record(now, [hostEvent('enrolled', named, `${body.hostIdentifier} ${what}.`)], id)
    await s.audit.record(ctx, {
      description: `Agent "${body.hostIdentifier}" ${known ? 're-enrolled (credential rotated)' : 'enrolled'}`,
      details: { uuid, machineId: maskMachineId(body.machineId), hostIdentifier: body.hostIdentifier, reEnrolled: !!known, licenseStatus: agent.license_status },
      user: `agent:${uuid}`,
      asset: agentAsset(agent),
    })
    return { uuid, credential, reEnrolled: !!known, pendingApproval: false, checkInIntervalSeconds: s.config.checkInSeconds, serverTime: iso(now) }
  })
}

function provesCredential(given: string | undefined, storedHash: string | null): boolean {
  if (!given || !storedHash) return false
  const a = Buffer.from(sha256(given))
  const b = Buffer.from(storedHash)
  return a.length === b.length && crypto.timingSafeEqual(a, b)
}

/**
 * A re-enrollment without proof: kept aside (the latest one per agent) until an
 * Administrator decides; the agent's current credential keeps working meanwhile.
 */
async function hold(
  s: GatewayState,
  ctx: Context,
  known: { id: number; uuid: string },
  body: Schemas['GatewayEnrollRequest'],
  hash: string,
  credential: string,
  now: number,
): Promise<Schemas['GatewayEnrollResponse']> {
  const agent = (await s.store.agent(known.id))!
  // A new id each time: a decision names the one it reviewed, never a later replacement.
  const reEnrollmentId = crypto.randomUUID()
  await s.store.holdReEnrollment({ agentId: known.id, id: reEnrollmentId, credentialHash: hash, hostIdentifier: body.hostIdentifier, sourceIp: ctx.sourceAddress, requestedMs: now })
  const proof = body.currentCredential ? "presented a credential that is not the agent's current one" : "did not present the agent's current credential"
  await s.events.record(
    now,
    [
      hostEvent(
        'reEnrollmentHeld',
        agent,
        `An enrollment as ${agent.host_identifier} (reported host name "${body.hostIdentifier}", from ${ctx.sourceAddress}) ${proof}; held until an Administrator approves it. The agent keeps its current credential meanwhile.`,
      ),
    ],
    known.id,
  )
  await s.audit.record(ctx, {
    description: `Re-enrollment of agent "${agent.host_identifier}" held for an Administrator's approval: it ${proof}`,
    details: {
      uuid: known.uuid,
      reEnrollmentId,
      machineId: maskMachineId(body.machineId),
      hostIdentifier: body.hostIdentifier,
      reEnrolled: true,
      pendingApproval: true,
      credentialPresented: !!body.currentCredential,
    },
    user: null,
    severity: 4,
    asset: agentAsset(agent),
  })
  return { uuid: known.uuid, credential, reEnrolled: true, pendingApproval: true, checkInIntervalSeconds: s.config.checkInSeconds, serverTime: iso(now) }
}

/**
 * An Administrator's decision on the held re-enrollment `reEnrollmentId` (the one reviewed):
 * approved, its credential replaces the agent's. One that a later enrollment replaced
 * meanwhile is not decided (409): the decision would fall on a request nobody reviewed.
 */
export async function decideReEnrollment(s: GatewayState, ctx: Context, uuid: string, decision: 'Approve' | 'Reject', reEnrollmentId: string): Promise<Schemas['AgentReEnrollmentDecision']> {
  const now = Date.now()
  return s.uow.run(async () => {
    const agent = await s.store.agentByUuid(uuid)
    if (!agent) throw problem('not-found', `No agent with uuid ${uuid}.`)
    const held = await s.store.heldReEnrollment(agent.id)
    if (!held) throw problem('not-found', `Agent ${agent.host_identifier} has no re-enrollment awaiting approval.`)
    if (held.id !== reEnrollmentId.toLowerCase()) {
      throw problem(
        'reenrollment-replaced',
        `The re-enrollment ${reEnrollmentId} of agent ${agent.host_identifier} is no longer the one held: a later enrollment (reported host name "${held.host_identifier}", from ${held.source_ip ?? 'an unknown address'}, at ${iso(held.requested_ms)}) replaced it. Nothing was decided; review the agent's pendingReEnrollment again.`,
      )
    }
    await s.store.dropReEnrollment(agent.id)
    const requested = { reEnrollmentId: held.id, requestedTime: iso(held.requested_ms), hostIdentifier: held.host_identifier, sourceIp: held.source_ip }
    if (decision === 'Approve') {
      await s.store.rotateCredential(agent.id, held.credential_hash, held.host_identifier)
      forget(s, agent.id)
      await s.events.record(
        now,
        [hostEvent('enrolled', agent, `${agent.host_identifier} enrolled again, approved by ${ctx.actor ?? 'an Administrator'}; the previous credential no longer works.`)],
        agent.id,
      )
    }
    await s.audit.record(ctx, {
      description: `${decision === 'Approve' ? 'Approved' : 'Rejected'} the re-enrollment of agent "${agent.host_identifier}"${decision === 'Approve' ? ' (credential replaced)' : ''}`,
      details: { uuid: agent.uuid, decision, ...requested },
      asset: agentAsset(agent),
    })
    return { uuid: agent.uuid, decision, ...requested, decidedTime: iso(now) }
  })
}
