/**
 * Sets `key` in a Map kept as a bounded memo: the key goes last (a key set again moves there), and
 * once the map holds more than `max` entries the first, the least recently set, is dropped.
 */
export function setBounded<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > max) map.delete(map.keys().next().value!);
}
