import { describe, expect, it } from 'vitest';
import { escapeHtml, formatCount, renderAdminPage, renderHoldingPage, renderTemplate } from '../src/core/pages';

const view = { title: 'Sale', message: 'Wait', ticket: 1234, ahead: 1233, estimate: 'Estimated wait: about 4 minutes.', refreshSeconds: 7, assetPrefix: '/__wr/assets/' };

describe('rendering', () => {
  it('escapes every interpolated value', () => {
    const html = renderHoldingPage({ ...view, title: '<script>alert(1)</script>', message: `"'&<>` });
    expect(html).not.toContain('<script>alert');
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).toContain('&quot;&#39;&amp;&lt;&gt;');
    expect(escapeHtml(`<a href="x" onclick='y'>&</a>`)).toBe('&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
  });

  it('shows the place in line and the number ahead', () => {
    const html = renderHoldingPage(view);
    expect(html).toContain('>1,234</strong>');
    expect(html).toContain('1,233 people are ahead of you.');
    expect(html).toContain('content="7"');
    expect(html).toContain('href="/__wr/assets/style.css"');
    expect(renderHoldingPage({ ...view, ahead: 0 })).toContain('You are next.');
    expect(renderHoldingPage({ ...view, ahead: 1 })).toContain('1 person is ahead of you.');
  });

  it('says so honestly when the place is not known', () => {
    const html = renderHoldingPage({ ...view, ticket: undefined, ahead: undefined });
    expect(html).toContain('We are checking your place in line');
    expect(html).toContain('Ticket pending');
  });

  it('leaves no slot unfilled, and refuses a slot without a value', () => {
    expect(renderHoldingPage(view)).not.toMatch(/\{\{/);
    expect(() => renderTemplate('{{missing}}', {})).toThrow(/missing/);
  });

  it('shows the estimate', () => {
    expect(renderHoldingPage(view)).toContain('<p class="estimate" id="estimate">Estimated wait: about 4 minutes.</p>');
  });

  it('renders the admin page with the figures and an anti-forgery token', () => {
    const html = renderAdminPage({
      queue: 'default',
      stats: {
        tail: 1500,
        cursor: 200,
        paused: true,
        maxActive: 500,
        maxNewPerMinute: 0,
        active: 120,
        admittedLastMinute: 42,
        admittedLast5Minutes: 150,
        reserved: 3,
        avgWaitSeconds: 185,
      },
      modeText: 'capacity',
      csrf: 'tok"en',
      actionPrefix: '/__wr/admin/',
      actionQuery: '',
      queues: undefined,
      assetPrefix: '/__wr/assets/',
      maxAdmit: 100000,
      notice: '<b>',
      asOf: 'now',
      propagationSeconds: 1,
    });
    expect(html).toContain('<dd id="waiting">1,300</dd>');
    expect(html).toContain('<dd id="active">120 of 500</dd>');
    expect(html).toContain('<dd id="admitted-minute">42</dd>');
    expect(html).toContain('<dd id="avg-wait" class="text">about 3 minutes</dd>');
    expect(html).toContain('<dd id="state" class="text">paused</dd>');
    expect(html).toContain('Resume admission');
    expect(html).toContain('name="csrf" value="tok&quot;en"');
    expect(html).toContain('&lt;b&gt;');
    expect(html).toContain('within 1 second (the per-POP cache lifetime)');
    expect(html).not.toMatch(/\{\{/);
  });

  it.each([
    [0, '0'],
    [999, '999'],
    [1000, '1,000'],
    [1234567, '1,234,567'],
  ])('formats %d as %s without Intl', (n, text) => {
    expect(formatCount(n)).toBe(text);
  });
});
