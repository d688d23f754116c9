import type { FastifyReply, FastifyRequest } from 'fastify'
import type { operations } from '../generated/openapi.js'

type Content<T> = T extends { content: { 'application/json': infer B } } ? B : never

/** The JSON body an operation takes. */
export type Body<Op extends keyof operations> = operations[Op] extends { requestBody: infer R } ? Content<NonNullable<R>> : never
/** The query parameters an operation takes. */
export type Query<Op extends keyof operations> = operations[Op]['parameters'] extends { query?: infer Q } ? NonNullable<Q> : never
/** The path parameters an operation takes. */
export type Params<Op extends keyof operations> = operations[Op]['parameters'] extends { path?: infer P } ? NonNullable<P> : never
/** The JSON of an operation's 200 answer. */
export type Ok<Op extends keyof operations> = operations[Op]['responses'] extends { 200: infer R } ? Content<R> : never

export type Req<Op extends keyof operations> = FastifyRequest<{ Body: Body<Op>; Querystring: Query<Op>; Params: Params<Op> }>

/** A handler typed from the contract: its name is the operationId, its answer the 200 schema. */
export type Handler<Op extends keyof operations> = (req: Req<Op>, reply: FastifyReply) => Promise<Ok<Op> | FastifyReply> | Ok<Op> | FastifyReply

export type Handlers<Ops extends keyof operations> = { [Op in Ops]: Handler<Op> }
