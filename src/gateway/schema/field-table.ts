/**
 * Fields made from a table of their descriptions: for object types whose fields read their shape's
 * properties as they are (`t.exposeInt(name, { description })` and the like), so that each name is
 * written once and the table reads as the type's documentation. Field order is the table's (it is
 * the order of the published schema).
 */
export function fieldTable<Name extends string, Field>(
  descriptions: Record<Name, string>,
  field: (name: Name, description: string) => Field,
): Record<Name, Field> {
  const fields = {} as Record<Name, Field>;
  for (const name of Object.keys(descriptions) as Name[]) fields[name] = field(name, descriptions[name]);
  return fields;
}
