// Instance lifecycle: create a managed instance or attach an external one through its
// kubeconfig Secret; the server's field violations appear beside the fields they name.

import { api, ApiError, type Instance } from './client';
import { h, mount } from './dom';

function field(label: string, name: string, attrs: Record<string, unknown> = {}) {
  return h(
    'label',
    { class: 'field', 'data-field': name },
    h('span', {}, label),
    h('input', { name, ...attrs }),
    h('span', { class: 'field-error', role: 'alert' }),
  );
}

export function createForm(root: Element, done: (name: string) => void) {
  const form = h(
    'form',
    { id: 'create-instance', class: 'form' },
    field('Name', 'instance.metadata.name', { placeholder: 'team-a', required: true }),
    h(
      'label',
      { class: 'field', 'data-field': 'instance.spec.mode' },
      h('span', {}, 'Mode'),
      h('select', { name: 'instance.spec.mode' }, h('option', { value: 'INSTANCE_MODE_MANAGED' }, 'Managed (Kairship asks karmada-operator for a control plane)'), h('option', { value: 'INSTANCE_MODE_EXTERNAL' }, 'External (attach an existing Karmada by its kubeconfig Secret)')),
      h('span', { class: 'field-error', role: 'alert' }),
    ),
    h(
      'fieldset',
      { class: 'managed' },
      field('Namespace for the Karmada object (optional)', 'instance.spec.managed_namespace'),
      field('Karmada version (optional)', 'instance.spec.karmada_version', { placeholder: 'v1.18.2' }),
      field('Image registry for every component (optional; air-gapped clusters)', 'instance.spec.image_registry', { placeholder: 'registry.internal/karmada' }),
      field("Karmada's CRD tarball URL (optional)", 'instance.spec.crd_tarball_url', { placeholder: 'http://kairship.kairship-system.svc:8080/karmada-crds/v1.18.2/crds.tar.gz' }),
    ),
    h(
      'fieldset',
      { class: 'external', hidden: true },
      field('Secret namespace', 'instance.spec.kubeconfig_secret_ref.namespace', { value: 'kairship-system' }),
      field('Secret name', 'instance.spec.kubeconfig_secret_ref.name'),
      field('Key', 'instance.spec.kubeconfig_secret_ref.key', { value: 'kubeconfig' }),
    ),
    h('div', { class: 'form-error', role: 'alert' }),
    h('button', { class: 'primary', type: 'submit' }, 'Create instance'),
  );
  const value = (n: string) => (form.querySelector(`[name="${n}"]`) as HTMLInputElement | null)?.value.trim() ?? '';
  const mode = form.querySelector('select') as HTMLSelectElement;
  mode.addEventListener('change', () => {
    const external = mode.value === 'INSTANCE_MODE_EXTERNAL';
    (form.querySelector('.managed') as HTMLElement).hidden = external;
    (form.querySelector('.external') as HTMLElement).hidden = !external;
  });
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    form.querySelectorAll('.field-error, .form-error').forEach((e) => mount(e));
    const external = mode.value === 'INSTANCE_MODE_EXTERNAL';
    const instance: Instance = {
      metadata: { name: value('instance.metadata.name') },
      spec: external
        ? {
            mode: 'INSTANCE_MODE_EXTERNAL',
            kubeconfigSecretRef: {
              namespace: value('instance.spec.kubeconfig_secret_ref.namespace'),
              name: value('instance.spec.kubeconfig_secret_ref.name'),
              key: value('instance.spec.kubeconfig_secret_ref.key'),
            },
          }
        : {
            mode: 'INSTANCE_MODE_MANAGED',
            managedNamespace: value('instance.spec.managed_namespace'),
            karmadaVersion: value('instance.spec.karmada_version'),
            imageRegistry: value('instance.spec.image_registry'),
            crdTarballUrl: value('instance.spec.crd_tarball_url'),
          },
    };
    try {
      const created = await api.createInstance(instance);
      done(created.metadata?.name ?? '');
    } catch (e) {
      const violations = e instanceof ApiError ? e.violations : [];
      for (const v of violations) {
        const slot = form.querySelector(`[data-field="${v.field}"] .field-error`);
        if (slot) mount(slot, v.description ?? '');
        else mount(form.querySelector('.form-error') as Element, `${v.field}: ${v.description}`);
      }
      if (violations.length === 0) mount(form.querySelector('.form-error') as Element, (e as Error).message);
    }
  });
  mount(root, h('p', {}, h('a', { href: '#/' }, '← Fleet')), h('h2', {}, 'New instance'), form);
}
