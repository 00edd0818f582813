import { rbdCall } from './errors';
import type { Image } from './image';
import { native } from './native';

/* Image metadata (key/value in the image header): vmsnap's ownership labels live here. */

/** rbd_metadata_get: null when the key is absent. */
export function getMetadata(image: Image, key: string): Promise<string | null> {
  return rbdCall(() => native().metadataGet(image.handle, key));
}

/** rbd_metadata_set. */
export function setMetadata(image: Image, key: string, value: string): Promise<void> {
  return rbdCall(() => native().metadataSet(image.handle, key, value));
}

/** rbd_metadata_list (all keys). */
export function listMetadata(image: Image): Promise<Record<string, string>> {
  return rbdCall(() => native().metadataList(image.handle));
}

/** rbd_metadata_remove. ENOENT when the key is absent. */
export function removeMetadata(image: Image, key: string): Promise<void> {
  return rbdCall(() => native().metadataRemove(image.handle, key));
}
