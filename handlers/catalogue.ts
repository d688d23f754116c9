import { entryView } from '../lib/catalogue/views.js'
import { contextOf } from '../lib/platform/context.js'
import type { Handlers } from './types.js'

export const catalogueHandlers: Handlers<'getCatalogue' | 'addCatalogueEntry' | 'deleteCatalogueEntry'> = {
  async getCatalogue(req) {
    return (await req.server.services.catalogue.list()).map(entryView)
  },

  async addCatalogueEntry(req) {
    return entryView(await req.server.services.catalogue.add(contextOf(req), req.principal!.name, req.body))
  },

  async deleteCatalogueEntry(req) {
    return entryView(await req.server.services.catalogue.remove(contextOf(req), req.params.entryId))
  },
}
