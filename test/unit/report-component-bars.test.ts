import assert from 'node:assert/strict';
import { test } from 'node:test';
import { componentLegendHtml, renderTimelineSvg } from '../../src/report/timeline-svg.ts';
import type { Timeline } from '../../src/report/timeline.ts';

// One machine over 0..10 s: a voter from 2 s, its apiserver starting 3 → 7 s, ready after, its
// controller-manager and scheduler starting at 8 s and not seen healthy by the end.
const timeline: Timeline = {
  start: 0,
  end: 10_000,
  membership: [],
  rows: [
    {
      name: 'm-1',
      removed: false,
      markers: [],
      segments: [{ category: 'voter', start: 2000, end: 10_000, open: true }],
      components: [
        { kind: 'apiserver', start: 3000, end: 7000, open: false },
        { kind: 'apiserver-ready', start: 7000, end: 10_000, open: true },
        { kind: 'controllers', start: 8000, end: 10_000, open: true },
      ],
    },
    { name: 'm-2', removed: false, markers: [], segments: [{ category: 'voter', start: 2000, end: 10_000, open: true }] },
  ],
};

test('each component bar is drawn in its machine\'s row, to scale, with what it shows in its title', () => {
  const svg = renderTimelineSvg(timeline, { squeezeIdle: false, id: 't' });
  const bars = [...svg.matchAll(/<rect class="component ([a-z-]+)( open)?" data-component="[a-z-]+" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"[^>]*><title>([^<]*)<\/title>/g)];
  assert.deepEqual(
    bars.map((b) => b[1]),
    ['apiserver', 'apiserver-ready', 'controllers'],
  );
  const widths = bars.map((b) => Number(b[4]));
  // 4 s, 3 s and 2 s on one scale.
  assert.ok(Math.abs(widths[0]! / widths[1]! - 4 / 3) < 0.01 && Math.abs(widths[1]! / widths[2]! - 3 / 2) < 0.01, widths.join(', '));
  assert.match(bars[0]![5]!, /^m-1: kube-apiserver starting \(started, until \/readyz ok\), \+3s for 4s$/);
  assert.equal(bars[2]![2], ' open', 'never seen healthy: an open bar');
  const rowOf = (machine: string): string => svg.split(`data-machine="${machine}"`)[1]!.split('</g>')[0]!;
  assert.equal((rowOf('m-1').match(/class="component /g) ?? []).length, 3);
  assert.equal((rowOf('m-2').match(/class="component /g) ?? []).length, 0, 'an etcd-only row has none');
});

test('the component legend names every bar kind', () => {
  const legend = componentLegendHtml();
  for (const kind of ['apiserver', 'apiserver-ready', 'controllers']) assert.match(legend, new RegExp(`data-legend="${kind}"`));
});
